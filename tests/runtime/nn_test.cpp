#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "tessera/runtime/ops/nn_internal.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Deterministic normal values (mean `offset`, deviation `scale`), contiguous, of `dtype`.
Tensor make(const Shape& s, DType dtype, uint32_t seed, double scale = 1.0, double offset = 0.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(offset, scale);
  std::vector<double> v(static_cast<size_t>(s.numel()));
  for (auto& x : v) x = dist(rng);
  return from_vector<double>(v, s).to(dtype);
}

// Logical (row-major) values of t as float64: the reference's input.
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

double tol(DType t) {
  switch (t) {
    case kFloat64:
      return 1e-12;
    case kFloat32:
      return 2e-6;
    default:
      return 2e-2;  // float16 / bfloat16 results are rounded to 8-11 significant bits
  }
}

// Every element finite and within tolerance (relative, plus as much absolute); reports the worst.
void check_close(const Tensor& got, const std::vector<double>& want, double tolerance) {
  std::vector<double> g = vals(got);
  REQUIRE(g.size() == want.size());
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const double excess = std::isfinite(g[i])
                              ? std::abs(g[i] - want[i]) / (1.0 + std::abs(want[i])) / tolerance
                              : std::numeric_limits<double>::infinity();
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (g.empty()) return;
  INFO("worst element " << worst << ": got " << g[worst] << ", want " << want[worst]);
  CHECK(worst_excess <= 1.0);
}

// (outer, size, inner) of a row-major shape around dim.
struct Split {
  int64_t outer = 1, size = 1, inner = 1;
};
Split split_at(const Shape& s, int64_t dim) {
  Split r;
  for (int64_t d = 0; d < s.ndim(); ++d) {
    if (d < dim) r.outer *= s[d];
    if (d == dim) r.size = s[d];
    if (d > dim) r.inner *= s[d];
  }
  return r;
}

std::vector<double> ref_softmax(const std::vector<double>& x, const Shape& s, int64_t dim,
                                bool log) {
  Split p = split_at(s, dim);
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * p.size + j) * p.inner + i); };
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < p.size; ++j) m = std::max(m, x[at(j)]);
      double sum = 0;
      for (int64_t j = 0; j < p.size; ++j) sum += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < p.size; ++j) {
        y[at(j)] = log ? x[at(j)] - m - std::log(sum) : std::exp(x[at(j)] - m) / sum;
      }
    }
  }
  return y;
}

void check_softmax(const Tensor& x, int64_t dim) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  INFO("shape " << x.sizes() << " strides " << x.strides() << " dim " << dim << " " << x.dtype());
  check_close(softmax(x, dim), ref_softmax(vals(x), x.sizes(), d, false), tol(x.dtype()));
  check_close(log_softmax(x, dim), ref_softmax(vals(x), x.sizes(), d, true), tol(x.dtype()));
}

// Layer / RMS norm reference over the trailing block of `n` elements of every row.
std::vector<double> ref_norm(const std::vector<double>& x, int64_t n, const std::vector<double>& w,
                             const std::vector<double>& b, double eps, bool rms) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r * n < x.size(); ++r) {
    const double* row = &x[r * n];
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) mean += row[i] / n;
    if (rms) mean = 0;
    for (int64_t i = 0; i < n; ++i) sq += (row[i] - mean) * (row[i] - mean) / n;
    const double rstd = 1.0 / std::sqrt(sq + eps);
    for (int64_t i = 0; i < n; ++i) {
      double v = (row[i] - mean) * rstd;
      if (!w.empty()) v *= w[i];
      if (!b.empty()) v += b[i];
      y[r * n + i] = v;
    }
  }
  return y;
}

// The gradient of softmax (log_softmax) along dim for an incoming gradient g, from the float64
// softmax of x: y (g - sum(g y)), and g - softmax sum(g).
std::vector<double> ref_softmax_grad(const std::vector<double>& x, const std::vector<double>& g,
                                     const Shape& s, int64_t dim, bool log) {
  const std::vector<double> y = ref_softmax(x, s, dim, false);
  Split p = split_at(s, dim);
  std::vector<double> dx(x.size());
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      auto at = [&](int64_t j) { return static_cast<size_t>((o * p.size + j) * p.inner + i); };
      double gy = 0, gsum = 0;
      for (int64_t j = 0; j < p.size; ++j) {
        gy += g[at(j)] * y[at(j)];
        gsum += g[at(j)];
      }
      for (int64_t j = 0; j < p.size; ++j) {
        dx[at(j)] = log ? g[at(j)] - y[at(j)] * gsum : y[at(j)] * (g[at(j)] - gy);
      }
    }
  }
  return dx;
}

}  // namespace

TEST_CASE("softmax and log_softmax match a float64 reference", "[nn][softmax]") {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    check_softmax(make({7}, dt, 1), 0);
    check_softmax(make({3, 5}, dt, 2, 3.0), 1);
    check_softmax(make({3, 5}, dt, 3), 0);
    for (int64_t dim : {0, 1, 2, -1, -3}) check_softmax(make({2, 3, 4}, dt, 4, 2.0), dim);
    // Strided inputs: transposed, permuted, sliced, expanded.
    check_softmax(make({4, 6}, dt, 5).t(), 0);
    check_softmax(make({4, 6}, dt, 6).t(), 1);
    check_softmax(make({2, 3, 4}, dt, 7).transpose(0, 2), 1);
    check_softmax(make({2, 3, 4}, dt, 8).permute({1, 2, 0}), -1);
    check_softmax(make({5, 9}, dt, 9).slice(1, 1, 9, 2), 1);
    check_softmax(make({5, 9}, dt, 10).slice(0, 0, 5, 2), 0);
    check_softmax(make({1, 4}, dt, 11).expand({3, 4}), 0);
    check_softmax(make({1, 4}, dt, 12).expand({3, 4}), 1);
    check_softmax(make({3, 1}, dt, 13).expand({3, 5}), 1);
  }
  // Large rows and many lanes: several blocks of lanes, several threads.
  check_softmax(make({300, 257}, kFloat32, 14, 4.0), 0);
  check_softmax(make({300, 257}, kFloat32, 15, 4.0), 1);
  check_softmax(make({3, 5000}, kFloat64, 16, 10.0), -1);
  check_softmax(make({130, 70}, kBFloat16, 17).t(), 1);
}

// Large inputs whose rows are strided are made row-major first, outputs whose rows are strided
// computed in a buffer and copied (Note [Rows read across the grain] in kernels/cpu/nn_rows.h):
// softmax, log_softmax and their gradients (with a strided incoming gradient too), layer_norm and
// rms_norm on such layouts, each over the staging bound (4096 elements), against float64.
TEST_CASE("softmax and the norms on large rows read across the grain match a float64 reference",
          "[nn][softmax][layer_norm][rms_norm]") {
  struct Layout {
    const char* name;
    Tensor x;
    int64_t dim;
  };
  for (DType dt : {kFloat32, kBFloat16}) {
    const std::vector<Layout> layouts = {
        {"transposed, along its contiguous dim", make({96, 80}, dt, 70, 3.0).t(), 0},
        {"transposed, along its strided dim", make({96, 80}, dt, 71, 3.0).t(), 1},
        {"permuted, dim 0", make({20, 24, 16}, dt, 72, 3.0).permute({2, 0, 1}), 0},
        {"permuted, dim 1", make({20, 24, 16}, dt, 73, 3.0).permute({2, 0, 1}), 1},
        {"permuted, last dim", make({20, 24, 16}, dt, 74, 3.0).permute({2, 0, 1}), -1},
        {"heads transposed", make({16, 64, 8}, dt, 75, 3.0).transpose(1, 2), -1},
        {"every other column", make({64, 200}, dt, 76, 3.0).slice(1, 0, 200, 2), 1},
    };
    for (const Layout& l : layouts) {
      INFO(dt << ", " << l.name << ", shape " << l.x.sizes() << ", dim " << l.dim);
      check_softmax(l.x, l.dim);
      const int64_t d = l.dim < 0 ? l.dim + l.x.dim() : l.dim;
      const Tensor x = l.x.detach().requires_grad_();
      const Tensor g_rows = make(x.sizes(), dt, 77);
      // The same logical gradient shape stored with its dims reversed.
      Shape reversed;
      for (int64_t i = x.dim() - 1; i >= 0; --i) reversed.push_back(x.size(i));
      const Tensor g_strided =
          make(reversed, dt, 78).permute(x.dim() == 2 ? Shape{1, 0} : Shape{2, 1, 0});
      const double t = dt == kBFloat16 ? 5e-2 : tol(dt) * 10;
      for (const Tensor& g : {g_rows, g_strided}) {
        for (bool log : {false, true}) {
          INFO((log ? "log_softmax" : "softmax")
               << " backward, incoming gradient strides " << g.strides());
          const Tensor y = log ? log_softmax(x, l.dim) : softmax(x, l.dim);
          check_close(autograd::grad({y}, {x}, {g})[0],
                      ref_softmax_grad(vals(x.detach()), vals(g), x.sizes(), d, log), t);
        }
      }
      // The norms over the trailing dim (and the trailing two of the 3-D layouts).
      for (int64_t k = 1; k <= std::min<int64_t>(2, x.dim() - 1); ++k) {
        const Shape norm(x.sizes().end() - k, x.sizes().end());
        const int64_t n = norm.numel();
        INFO("normalized_shape " << norm);
        check_close(layer_norm(l.x, norm), ref_norm(vals(l.x), n, {}, {}, 1e-5, false), t);
        check_close(rms_norm(l.x, norm, Tensor(), 1e-6), ref_norm(vals(l.x), n, {}, {}, 1e-6, true),
                    t);
      }
    }
  }
}

TEST_CASE("softmax stays finite for large-magnitude logits", "[nn][softmax]") {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    Tensor x = from_vector<double>({1000, -1000, 999, 0, -1000, 1000}, {2, 3}).to(dt);
    for (int64_t dim : {0, 1}) {
      for (bool log : {false, true}) {
        Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
        for (double v : vals(y)) CHECK(std::isfinite(v));
        check_close(y, ref_softmax(vals(x), x.sizes(), dim, log), tol(dt));
      }
    }
  }
  CHECK(vals(softmax(from_vector<float>({1000, 1000}, {2}), 0)) == std::vector<double>{0.5, 0.5});
  // exp underflows to exactly 0, as IEEE exp, also on the vectorized paths (rows and lanes).
  CHECK(vals(softmax(from_vector<float>({1000, -1000, 0, 1000, -1000, 0, 0, 0}, {8}), 0)) ==
        std::vector<double>{0.5, 0, 0, 0.5, 0, 0, 0, 0});
  std::vector<float> cols(16, -1000.0f);
  for (size_t j = 0; j < 8; ++j) cols[j] = 1000.0f;  // row 0 wins in every column
  CHECK(vals(softmax(from_vector<float>(cols, {2, 8}), 0)) ==
        std::vector<double>({1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST_CASE("softmax propagates NaN and handles -inf as PyTorch", "[nn][softmax]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Rows along dim 1, contiguous (the rows path) or column-major (dim 1 strided: the lanes path).
  Tensor x = from_vector<double>({1, nan, 2, -inf, 0, -inf, -inf, -inf, -inf}, {3, 3});
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool transposed : {false, true}) {
      Tensor in = transposed ? x.to(dt).t().contiguous().t() : x.to(dt);
      auto p = vals(softmax(in, 1));
      auto lp = vals(log_softmax(in, 1));
      for (int j = 0; j < 3; ++j) CHECK(std::isnan(p[j]));  // a NaN poisons its row
      CHECK(p[3] == 0.0);
      CHECK(p[4] == 1.0);
      CHECK(lp[3] == -inf);
      CHECK(lp[4] == 0.0);
      for (int j = 6; j < 9; ++j) CHECK(std::isnan(p[j]));  // an all -inf row is NaN
    }
  }
}

TEST_CASE("softmax handles zero-size and 0-dim inputs", "[nn][softmax]") {
  Tensor empty_batch = softmax(make({0, 5}, kFloat32, 1), 1);
  CHECK(empty_batch.sizes() == Shape{0, 5});
  CHECK(log_softmax(make({3, 0}, kFloat64, 1), 1).sizes() == Shape{3, 0});
  Tensor s = from_vector<float>({2.5f}, {}).reshape({});
  CHECK(softmax(s, 0).item<double>() == 1.0);
  CHECK(log_softmax(s, -1).item<double>() == 0.0);
  CHECK(softmax(s, 0).dim() == 0);
}

TEST_CASE("softmax rejects integer inputs and bad dims", "[nn][softmax]") {
  Tensor i = from_vector<int64_t>({1, 2, 3}, {3});
  CHECK_THROWS_AS(softmax(i, 0), DTypeError);
  CHECK_THROWS_WITH(softmax(i, 0),
                    Catch::Contains("[softmax] expected a floating point input, got int64"));
  CHECK_THROWS_WITH(log_softmax(i, 0), Catch::Contains("[log_softmax]"));
  CHECK_THROWS_AS(softmax(make({2, 3}, kFloat32, 1), 2), IndexError);
  CHECK_THROWS_WITH(softmax(make({2, 3}, kFloat32, 1), -3), Catch::Contains("[softmax]"));
}

TEST_CASE("layer_norm matches a float64 reference", "[nn][layer_norm]") {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double t = dt == kBFloat16 ? 5e-2 : tol(dt) * 10;
    for (const Shape& norm : {Shape{6}, Shape{3, 6}}) {
      Tensor x = make({4, 3, 6}, dt, 20, 2.0);
      Tensor w = make(norm, dt, 21);
      Tensor b = make(norm, dt, 22);
      const int64_t n = norm.numel();
      auto xv = vals(x), wv = vals(w), bv = vals(b);
      INFO("dtype " << dt << " normalized_shape " << norm);
      check_close(layer_norm(x, norm), ref_norm(xv, n, {}, {}, 1e-5, false), t);
      check_close(layer_norm(x, norm, w, b, 1e-3), ref_norm(xv, n, wv, bv, 1e-3, false), t);
      check_close(layer_norm(x, norm, w), ref_norm(xv, n, wv, {}, 1e-5, false), t);
      check_close(layer_norm(x, norm, Tensor(), b), ref_norm(xv, n, {}, bv, 1e-5, false), t);
    }
    // Strided inputs: transposed rows, sliced rows, expanded rows; strided weight.
    Tensor xt = make({6, 5}, dt, 23).t();
    Tensor wt = make({2, 5}, dt, 24).select(0, 1);
    check_close(layer_norm(xt, {6}), ref_norm(vals(xt), 6, {}, {}, 1e-5, false), t);
    Tensor xs = make({4, 10}, dt, 25).slice(1, 0, 10, 2);
    check_close(layer_norm(xs, {5}, wt), ref_norm(vals(xs), 5, vals(wt), {}, 1e-5, false), t);
    Tensor xe = make({1, 5}, dt, 26).expand({3, 5});
    check_close(layer_norm(xe, {5}), ref_norm(vals(xe), 5, {}, {}, 1e-5, false), t);
    Tensor x3 = make({3, 4, 5}, dt, 27).permute({2, 0, 1});
    check_close(layer_norm(x3, {3, 4}), ref_norm(vals(x3), 12, {}, {}, 1e-5, false), t);
  }
}

TEST_CASE("layer_norm is stable, mixed-precision and zero-size safe", "[nn][layer_norm]") {
  // A large common offset must not swamp the variance (two-pass statistics).
  Tensor xf = make({8, 64}, kFloat32, 30, 1.0, 1e4);
  check_close(layer_norm(xf, {64}), ref_norm(vals(xf), 64, {}, {}, 1e-5, false), 1e-3);
  // Float32 weight with a bfloat16 input, as PyTorch's mixed-precision CPU layer_norm.
  Tensor xb = make({3, 8}, kBFloat16, 31);
  Tensor w = make({8}, kFloat32, 32);
  Tensor y = layer_norm(xb, {8}, w);
  CHECK(y.dtype() == kBFloat16);
  check_close(y, ref_norm(vals(xb), 8, vals(w), {}, 1e-5, false), 5e-2);
  // Large rows, many rows: threads.
  Tensor big = make({513, 300}, kFloat32, 33, 3.0);
  check_close(layer_norm(big, {300}), ref_norm(vals(big), 300, {}, {}, 1e-5, false), 1e-5);
  CHECK(layer_norm(make({0, 4}, kFloat32, 1), {4}).sizes() == Shape{0, 4});
  // Rows of no elements: an empty output, and statistics that say so (NaN, never stale memory).
  const Tensor no_columns = make({4, 0, 9}, kFloat32, 1);
  const detail::NormForward ln = detail::layer_norm_forward(no_columns, {0, 9}, {}, {}, 1e-5);
  const detail::NormForward rms = detail::rms_norm_forward(no_columns, {0, 9}, {}, {});
  CHECK(ln.out.sizes() == Shape{4, 0, 9});
  for (const Tensor& stat : {ln.mean, ln.rstd, rms.rstd}) {
    REQUIRE(stat.numel() == 4);
    for (double v : vals(stat)) CHECK(std::isnan(v));
  }
}

TEST_CASE("layer_norm and rms_norm reject bad shapes and dtypes", "[nn][layer_norm][rms_norm]") {
  Tensor x = make({2, 3, 4}, kFloat32, 40);
  CHECK_THROWS_AS(layer_norm(x, {3}), ShapeError);
  CHECK_THROWS_WITH(layer_norm(x, {3}), Catch::Contains("[layer_norm]") &&
                                            Catch::Contains("[2, 3, 4]") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(layer_norm(x, {2, 3, 4, 5}), Catch::Contains("[layer_norm]"));
  CHECK_THROWS_WITH(layer_norm(x, {4}, make({3}, kFloat32, 1)),
                    Catch::Contains("[layer_norm] expected weight of shape [4]"));
  CHECK_THROWS_WITH(layer_norm(x, {4}, Tensor(), make({4, 1}, kFloat32, 1)),
                    Catch::Contains("[layer_norm] expected bias of shape [4]"));
  CHECK_THROWS_AS(layer_norm(x, {4}, make({4}, kFloat64, 1)), DTypeError);
  CHECK_THROWS_AS(layer_norm(from_vector<int32_t>({1, 2}, {2}), {2}), DTypeError);
  CHECK_THROWS_WITH(rms_norm(x, {3, 3}), Catch::Contains("[rms_norm]"));
  CHECK_THROWS_WITH(rms_norm(x, {4}, make({5}, kFloat32, 1)), Catch::Contains("[rms_norm]"));
  CHECK_THROWS_AS(rms_norm(from_vector<int64_t>({1, 2}, {2}), {2}), DTypeError);
}

TEST_CASE("rms_norm matches a float64 reference", "[nn][rms_norm]") {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double t = dt == kBFloat16 ? 5e-2 : tol(dt) * 10;
    Tensor x = make({5, 2, 8}, dt, 50, 2.0);
    Tensor w = make({2, 8}, dt, 51);
    INFO("dtype " << dt);
    check_close(rms_norm(x, {8}, Tensor(), 1e-6), ref_norm(vals(x), 8, {}, {}, 1e-6, true), t);
    check_close(rms_norm(x, {2, 8}, w, 1e-6), ref_norm(vals(x), 16, vals(w), {}, 1e-6, true), t);
    Tensor xt = make({8, 5}, dt, 52).t();
    check_close(rms_norm(xt, {8}, Tensor(), 1e-6), ref_norm(vals(xt), 8, {}, {}, 1e-6, true), t);
  }
  // A weight of another floating dtype is allowed; the result keeps the input's dtype.
  Tensor x = make({3, 8}, kFloat32, 53);
  Tensor w64 = make({8}, kFloat64, 54);
  Tensor y = rms_norm(x, {8}, w64, 1e-6);
  CHECK(y.dtype() == kFloat32);
  check_close(y, ref_norm(vals(x), 8, vals(w64), {}, 1e-6, true), 2e-5);
  CHECK_THROWS_AS(rms_norm(x, {8}, from_vector<int64_t>(std::vector<int64_t>(8, 1), {8})),
                  DTypeError);
  CHECK(rms_norm(make({0, 3}, kFloat32, 1), {3}).sizes() == Shape{0, 3});
}

TEST_CASE("rms_norm's default eps is the machine epsilon PyTorch computes with", "[nn][rms_norm]") {
  // Tiny inputs make mean(x^2) comparable to eps, so the default is visible in the result.
  Tensor x = make({3, 4}, kFloat64, 60, 1e-4);
  const double e32 = std::numeric_limits<float>::epsilon();
  const double e64 = std::numeric_limits<double>::epsilon();
  Tensor xf = x.to(kFloat32);
  check_close(rms_norm(xf, {4}), ref_norm(vals(xf), 4, {}, {}, e32, true), 1e-5);
  check_close(rms_norm(x, {4}), ref_norm(vals(x), 4, {}, {}, e64, true), 1e-12);
  Tensor xb = x.to(kBFloat16);
  check_close(rms_norm(xb, {4}), ref_norm(vals(xb), 4, {}, {}, e32, true), 2e-2);
}

TEST_CASE("embedding gathers rows for int32 and int64 indices of any shape", "[nn][embedding]") {
  Tensor w = make({5, 3}, kFloat32, 70);
  auto wv = vals(w);
  auto check_rows = [&](const Tensor& weight, const Tensor& idx) {
    Tensor out = embedding(weight, idx);
    Shape want = idx.sizes();
    want.push_back(3);
    REQUIRE(out.sizes() == want);
    auto iv = vals(idx);
    auto wr = vals(weight);
    std::vector<double> ref;
    for (double i : iv) {
      for (int64_t j = 0; j < 3; ++j) ref.push_back(wr[static_cast<size_t>(i) * 3 + j]);
    }
    CHECK(vals(out) == ref);
  };
  check_rows(w, from_vector<int64_t>({4, 0, 0, 2}, {4}));
  check_rows(w, from_vector<int32_t>({1, 3, 4, 4, 0, 2}, {2, 3}));
  check_rows(w, from_vector<int64_t>({1, 3, 4, 4, 0, 2}, {2, 3}).t());
  check_rows(w, from_vector<int64_t>({3}, {}).reshape({}));
  check_rows(w, from_vector<int64_t>({}, {0, 2}));
  check_rows(make({3, 5}, kFloat64, 71).t(), from_vector<int32_t>({2, 4, 0}, {3}));
  check_rows(make({5, 3}, kBFloat16, 72), from_vector<int64_t>({2, 1}, {1, 2}));
  // Many rows: threads.
  std::vector<int64_t> many(20000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>((i * 7) % 5);
  check_rows(w, from_vector<int64_t>(many, {100, 200}));
}

TEST_CASE("embedding rejects out-of-range and non-integer indices", "[nn][embedding]") {
  Tensor w = make({5, 3}, kFloat32, 73);
  CHECK_THROWS_AS(embedding(w, from_vector<int64_t>({1, 7}, {2})), IndexError);
  CHECK_THROWS_WITH(embedding(w, from_vector<int64_t>({1, 7}, {2})),
                    Catch::Contains("[embedding] index 7 is out of range for a weight of 5 rows"));
  CHECK_THROWS_WITH(embedding(w, from_vector<int32_t>({-1}, {1})),
                    Catch::Contains("[embedding] index -1 is out of range"));
  CHECK_THROWS_AS(embedding(w, from_vector<float>({1}, {1})), DTypeError);
  CHECK_THROWS_WITH(embedding(make({5}, kFloat32, 1), from_vector<int64_t>({1}, {1})),
                    Catch::Contains("[embedding]"));
}

namespace {

// cross_entropy reference for logits rows [n, c] and targets, per PyTorch's formula.
struct CeRef {
  std::vector<double> per_sample;
  double sum = 0;
  int64_t counted = 0;
};
CeRef ref_cross_entropy(const std::vector<double>& x, int64_t n, int64_t c,
                        const std::vector<double>& target, int64_t ignore, double eps) {
  CeRef r;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = &x[static_cast<size_t>(i * c)];
    const auto t = static_cast<int64_t>(target[static_cast<size_t>(i)]);
    if (t == ignore) {
      r.per_sample.push_back(0.0);
      continue;
    }
    double m = row[0], s = 0, mean_neg_logp = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, row[j]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(row[j] - m);
    auto logp = [&](int64_t j) { return row[j] - m - std::log(s); };
    for (int64_t j = 0; j < c; ++j) mean_neg_logp -= logp(j) / c;
    const double loss = (1 - eps) * -logp(t) + eps * mean_neg_logp;
    r.per_sample.push_back(loss);
    r.sum += loss;
    ++r.counted;
  }
  return r;
}

}  // namespace

TEST_CASE("cross_entropy matches PyTorch's formula", "[nn][cross_entropy]") {
  const std::vector<int64_t> tv{2, 0, 4, -100, 1, 4, 3};
  Tensor target = from_vector<int64_t>(tv, {7});
  std::vector<double> td(tv.begin(), tv.end());
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double t = dt == kBFloat16 ? 3e-2 : tol(dt) * 10;
    for (bool transposed : {false, true}) {
      Tensor logits = transposed ? make({5, 7}, dt, 80, 3.0).t() : make({7, 5}, dt, 80, 3.0);
      for (double eps : {0.0, 0.1}) {
        INFO("dtype " << dt << " transposed " << transposed << " label_smoothing " << eps);
        CeRef r = ref_cross_entropy(vals(logits), 7, 5, td, -100, eps);
        check_close(
            cross_entropy(logits, target, {.label_smoothing = eps, .reduction = Reduction::None}),
            r.per_sample, t);
        check_close(
            cross_entropy(logits, target, {.label_smoothing = eps, .reduction = Reduction::Sum}),
            {r.sum}, t);
        Tensor mean = cross_entropy(logits, target, {.label_smoothing = eps});
        CHECK(mean.dim() == 0);
        CHECK(mean.dtype() == dt);
        check_close(mean, {r.sum / static_cast<double>(r.counted)}, t);
      }
    }
  }
  // A custom ignore_index that is a valid class is skipped and not counted.
  Tensor logits = make({7, 5}, kFloat64, 81);
  CeRef r = ref_cross_entropy(vals(logits), 7, 5, {2, 0, 4, 4, 1, 4, 3}, 4, 0.2);
  Tensor t4 = from_vector<int64_t>({2, 0, 4, 4, 1, 4, 3}, {7});
  check_close(cross_entropy(logits, t4, {.ignore_index = 4, .label_smoothing = 0.2}),
              {r.sum / static_cast<double>(r.counted)}, 1e-12);
}

TEST_CASE("cross_entropy accepts [C] and [N, C, d] logits", "[nn][cross_entropy]") {
  Tensor one = make({6}, kFloat64, 82);
  CeRef r1 = ref_cross_entropy(vals(one), 1, 6, {3}, -100, 0.0);
  Tensor l1 = cross_entropy(one, from_vector<int64_t>({3}, {}).reshape({}));
  CHECK(l1.dim() == 0);
  check_close(l1, {r1.sum}, 1e-12);
  // [N, C, d] against the reference on the rows [N * d, C] (class dim moved last).
  Tensor x = make({2, 4, 3}, kFloat64, 83);
  Tensor target = from_vector<int64_t>({0, 3, 1, 2, 2, -100}, {2, 3});
  CeRef r = ref_cross_entropy(vals(x.permute({0, 2, 1})), 6, 4, vals(target), -100, 0.0);
  Tensor none = cross_entropy(x, target, {.reduction = Reduction::None});
  CHECK(none.sizes() == Shape{2, 3});
  check_close(none, r.per_sample, 1e-12);
  check_close(cross_entropy(x, target), {r.sum / 5.0}, 1e-12);
}

TEST_CASE("cross_entropy edge cases follow PyTorch", "[nn][cross_entropy]") {
  Tensor logits = make({2, 3}, kFloat32, 84);
  Tensor ignored = from_vector<int64_t>({-100, -100}, {2});
  CHECK(std::isnan(cross_entropy(logits, ignored).item<double>()));
  CHECK(cross_entropy(logits, ignored, {.reduction = Reduction::Sum}).item<double>() == 0.0);
  Tensor no_rows = make({0, 3}, kFloat32, 85);
  Tensor no_target = from_vector<int64_t>({}, {0});
  CHECK(cross_entropy(no_rows, no_target, {.reduction = Reduction::None}).sizes() == Shape{0});
  CHECK(std::isnan(cross_entropy(no_rows, no_target).item<double>()));
  // Huge logits stay finite.
  Tensor big = from_vector<float>({1000, -1000, 0, -1000, 1000, 0}, {2, 3});
  Tensor l = cross_entropy(big, from_vector<int64_t>({0, 2}, {2}), {.reduction = Reduction::None});
  check_close(l, {0.0, 1000.0}, 1e-6);
}

TEST_CASE("cross_entropy rejects bad targets", "[nn][cross_entropy]") {
  Tensor logits = make({3, 4}, kFloat32, 86);
  CHECK_THROWS_AS(cross_entropy(logits, from_vector<int64_t>({0, 4, 1}, {3})), IndexError);
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector<int64_t>({0, 4, 1}, {3})),
                    Catch::Contains("[cross_entropy] target 4 is out of range for 4 classes"));
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector<int64_t>({0, -1, 1}, {3})),
                    Catch::Contains("[cross_entropy] target -1"));
  CHECK_THROWS_AS(cross_entropy(logits, from_vector<int32_t>({0, 1, 1}, {3})), DTypeError);
  CHECK_THROWS_AS(cross_entropy(logits, from_vector<int64_t>({0, 1}, {2})), ShapeError);
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector<int64_t>({0, 1}, {2})),
                    Catch::Contains("[cross_entropy]") && Catch::Contains("[3, 4]"));
  CHECK_THROWS_WITH(
      cross_entropy(logits, from_vector<int64_t>({0, 1, 2}, {3}), {.label_smoothing = 1.5}),
      Catch::Contains("[cross_entropy] label_smoothing"));
  CHECK_THROWS_AS(
      cross_entropy(from_vector<int64_t>({1, 2}, {1, 2}), from_vector<int64_t>({0}, {1})),
      DTypeError);
}

namespace {

// Naive attention over a flattened batch: q [B, L, E], k [B, S, E], v [B, S, Ev]; bias(b, i, j)
// is added to the logits (-inf masks out); a row masked out entirely gives zeros, as PyTorch.
std::vector<double> ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                  const std::function<double(int64_t, int64_t, int64_t)>& bias) {
  const int64_t l = q.size(-2), e = q.size(-1), s = k.size(-2), ev = v.size(-1);
  const int64_t batches = q.numel() / (l * e);
  auto qv = vals(q), kv = vals(k), vv = vals(v);
  std::vector<double> out(static_cast<size_t>(batches * l * ev), 0.0);
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < l; ++i) {
      std::vector<double> logit(static_cast<size_t>(s));
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < e; ++c) dot += qv[(b * l + i) * e + c] * kv[(b * s + j) * e + c];
        logit[j] = dot * scale + bias(b, i, j);
        m = std::max(m, logit[j]);
      }
      if (std::isinf(m) && m < 0) continue;
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) sum += std::exp(logit[j] - m);
      for (int64_t j = 0; j < s; ++j) {
        const double p = std::exp(logit[j] - m) / sum;
        for (int64_t c = 0; c < ev; ++c) out[(b * l + i) * ev + c] += p * vv[(b * s + j) * ev + c];
      }
    }
  }
  return out;
}

double no_bias(int64_t, int64_t, int64_t) { return 0.0; }

}  // namespace

TEST_CASE("scaled_dot_product_attention matches a float64 reference", "[nn][sdpa]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double t = dt == kBFloat16 ? 5e-2 : tol(dt) * 10;
    INFO("dtype " << dt);
    Tensor q = make({2, 3, 4, 5}, dt, 90);
    Tensor k = make({2, 3, 6, 5}, dt, 91);
    Tensor v = make({2, 3, 6, 7}, dt, 92);
    const double sc = 1.0 / std::sqrt(5.0);
    Tensor out = scaled_dot_product_attention(q, k, v);
    CHECK(out.sizes() == Shape{2, 3, 4, 7});
    check_close(out, ref_attention(q, k, v, sc, no_bias), t);
    check_close(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.3),
                ref_attention(q, k, v, 0.3, no_bias), t);
    // Causal: top-left aligned lower triangle, with L != S.
    check_close(scaled_dot_product_attention(q, k, v, {}, 0.0, true),
                ref_attention(q, k, v, sc,
                              [&](int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -inf; }),
                t);
    // Bool mask [L, S] broadcast over batch and heads; row 1 is masked out entirely.
    std::vector<bool> keep{true,  false, true,  true,  false, true,  false, false,
                           false, false, false, false, true,  true,  true,  true,
                           true,  true,  false, true,  false, false, false, true};
    Tensor bool_mask = Tensor::make_empty({4, 6}, kBool, Device::cpu());
    for (size_t i = 0; i < keep.size(); ++i) bool_mask.data_ptr<bool>()[i] = keep[i];
    Tensor masked = scaled_dot_product_attention(q, k, v, bool_mask);
    check_close(masked,
                ref_attention(q, k, v, sc,
                              [&](int64_t, int64_t i, int64_t j) {
                                return keep[static_cast<size_t>(i * 6 + j)] ? 0.0 : -inf;
                              }),
                t);
    // Additive mask [2, 1, 4, 6] broadcast over heads.
    Tensor add_mask = make({2, 1, 4, 6}, dt, 93);
    auto am = vals(add_mask);
    check_close(scaled_dot_product_attention(q, k, v, add_mask),
                ref_attention(q, k, v, sc,
                              [&](int64_t b, int64_t i, int64_t j) {
                                return am[static_cast<size_t>(((b / 3) * 4 + i) * 6 + j)];
                              }),
                t);
    // Strided inputs: 2-D, a transposed key, an expanded key and value.
    Tensor q2 = make({3, 4}, dt, 94);
    Tensor k2 = make({4, 5}, dt, 95).t();
    Tensor v2 = make({5, 2}, dt, 96);
    check_close(scaled_dot_product_attention(q2, k2, v2), ref_attention(q2, k2, v2, 0.5, no_bias),
                t);
    Tensor ke = make({1, 3, 6, 5}, dt, 97).expand({2, 3, 6, 5});
    Tensor ve = make({2, 1, 6, 7}, dt, 98).expand({2, 3, 6, 7});
    check_close(scaled_dot_product_attention(q, ke, ve), ref_attention(q, ke, ve, sc, no_bias), t);
  }
}

TEST_CASE("scaled_dot_product_attention dropout and errors", "[nn][sdpa]") {
  Tensor q = make({2, 4, 8}, kFloat32, 100);
  Tensor k = make({2, 6, 8}, kFloat32, 101);
  Tensor v = make({2, 6, 3}, kFloat32, 102);
  check_close(scaled_dot_product_attention(q, k, v, {}, 1.0), std::vector<double>(24, 0.0), 0.0);
  Generator g1(7), g2(7);
  Tensor a = scaled_dot_product_attention(q, k, v, {}, 0.5, false, std::nullopt, &g1);
  Tensor b = scaled_dot_product_attention(q, k, v, {}, 0.5, false, std::nullopt, &g2);
  CHECK(vals(a) == vals(b));
  CHECK(vals(a) != vals(scaled_dot_product_attention(q, k, v)));

  const char* op = "[scaled_dot_product_attention]";
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k.to(kFloat64), v), DTypeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, make({2, 6, 5}, kFloat32, 1), v),
                    Catch::Contains(op) && Catch::Contains("[2, 6, 5]"));
  CHECK_THROWS_AS(scaled_dot_product_attention(q, k, make({2, 5, 3}, kFloat32, 1)), ShapeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, make({4, 6}, kFloat32, 1), 0.0, true),
                    Catch::Contains(op) && Catch::Contains("is_causal"));
  CHECK_THROWS_AS(scaled_dot_product_attention(
                      q, k, v, from_vector<int64_t>(std::vector<int64_t>(24, 1), {4, 6})),
                  DTypeError);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, make({3, 4, 6}, kFloat32, 1)),
                    Catch::Contains(op) && Catch::Contains("attn_mask"));
  CHECK_THROWS_AS(scaled_dot_product_attention(make({4}, kFloat32, 1), k, v), ShapeError);
}
