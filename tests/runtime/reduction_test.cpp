// Reductions against naive float64 references computed here, on contiguous, transposed,
// permuted, sliced, expanded, zero-size and 0-dim inputs, over every dim set.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Values uniform in [lo, hi] (integers in [lo, hi] for integral dtypes), converted to dt.
Tensor random_tensor(const Shape& shape, DType dt, uint64_t seed, double lo = -2, double hi = 2) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> uniform(lo, hi);
  std::uniform_int_distribution<int64_t> integer(static_cast<int64_t>(lo),
                                                 static_cast<int64_t>(hi));
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (double& x : v) x = is_floating_point(dt) ? uniform(gen) : static_cast<double>(integer(gen));
  return from_vector<double>(v, shape).to(dt);
}

Tensor filled(const Shape& shape, DType dt, double value) {
  Tensor t = Tensor::make_empty(shape, dt, Device::cpu());
  t.fill_(value);
  return t;
}

struct Layout {
  std::string name;
  Tensor t;  // logical shape [4, 5, 6]
};

std::vector<Layout> layouts(DType dt) {
  return {
      {"contiguous", random_tensor({4, 5, 6}, dt, 1)},
      {"transposed", random_tensor({6, 5, 4}, dt, 2).transpose(0, 2)},
      {"permuted", random_tensor({5, 6, 4}, dt, 3).permute({2, 0, 1})},
      {"sliced", random_tensor({9, 5, 13}, dt, 4).slice(0, 1, 9, 2).slice(2, 0, 12, 2)},
      {"expanded", random_tensor({4, 1, 6}, dt, 5).expand({4, 5, 6})},
  };
}

enum class Op { kSum, kProd, kMean, kAmax, kAmin, kArgmax, kArgmin, kVar, kNorm };

// The input's values grouped by output element (keepdim, row-major), each group in row-major
// input order, so that a group's position i is the index along a single reduced dim.
std::vector<std::vector<double>> groups_of(const Tensor& t, const std::vector<int64_t>& dims) {
  const std::vector<double> v = t.to_vector<double>();
  const Shape& shape = t.sizes();
  const int64_t nd = t.dim();
  std::vector<bool> reduced(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  int64_t num_out = 1;
  for (int64_t d = 0; d < nd; ++d) num_out *= reduced[static_cast<size_t>(d)] ? 1 : shape[d];
  std::vector<std::vector<double>> groups(static_cast<size_t>(num_out));
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    int64_t rem = i, out = 0, out_stride = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t idx = rem % shape[d];
      rem /= shape[d];
      if (!reduced[static_cast<size_t>(d)]) {
        out += idx * out_stride;
        out_stride *= shape[d];
      }
    }
    groups[static_cast<size_t>(out)].push_back(v[static_cast<size_t>(i)]);
  }
  return groups;
}

// Reference value of op over g; `scale` receives the magnitude that rounding errors scale with.
double reference(Op op, const std::vector<double>& g, double param, bool integral, double& scale) {
  const double n = static_cast<double>(g.size());
  double sum = 0, abs_sum = 0;
  for (double x : g) {
    sum += x;
    abs_sum += std::abs(x);
  }
  const double mean = sum / n;
  scale = 0;
  switch (op) {
    case Op::kSum:
      scale = abs_sum;
      return sum;
    case Op::kMean:
      scale = abs_sum / n;
      return mean;
    case Op::kProd: {
      if (integral) {  // int64 products wrap around
        uint64_t p = 1;
        for (double x : g) p *= static_cast<uint64_t>(static_cast<int64_t>(x));
        return static_cast<double>(static_cast<int64_t>(p));
      }
      double p = 1;
      for (double x : g) p *= x;
      scale = std::abs(p) * n;
      return p;
    }
    case Op::kAmax:
    case Op::kAmin:
    case Op::kArgmax:
    case Op::kArgmin: {
      const bool is_max = op == Op::kAmax || op == Op::kArgmax;
      size_t best = 0;
      for (size_t i = 1; i < g.size() && !std::isnan(g[best]); ++i) {
        if (std::isnan(g[i]) || (is_max ? g[i] > g[best] : g[i] < g[best])) best = i;
      }
      return op == Op::kAmax || op == Op::kAmin ? g[best] : static_cast<double>(best);
    }
    case Op::kVar: {
      double m2 = 0;
      for (double x : g) m2 += (x - mean) * (x - mean);
      const double dof = std::max(n - param, 0.0);
      scale = m2 / dof;  // the mean's rounding must cancel (two-pass with correction)
      return m2 / dof;
    }
    case Op::kNorm: {
      double acc = param == -kInf ? kInf : 0;
      for (double x : g) {
        const double a = std::abs(x);
        if (param == 0) {
          acc += x != 0;
        } else if (param == kInf) {
          acc = std::isnan(a) || a > acc ? a : acc;
        } else if (param == -kInf) {
          acc = std::isnan(a) || a < acc ? a : acc;
        } else {
          acc += std::pow(a, param);
        }
      }
      const double r = std::isinf(param) || param == 0 ? acc : std::pow(acc, 1 / param);
      scale = std::abs(r);
      return r;
    }
  }
  return kNaN;
}

// Relative tolerance of a result of dtype dt (0: exact).
double rtol_of(DType dt) {
  switch (dt) {
    case kFloat64:
      return 1e-12;
    case kFloat32:
      return 2e-5;
    case kFloat16:
    case kBFloat16:
      return 2e-2;
    default:
      return 0;
  }
}

Tensor run_op(Op op, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
              double param) {
  switch (op) {
    case Op::kSum:
      return sum(t, dims, keepdim);
    case Op::kProd:
      return prod(t, dims, keepdim);
    case Op::kMean:
      return mean(t, dims, keepdim);
    case Op::kAmax:
      return amax(t, dims, keepdim);
    case Op::kAmin:
      return amin(t, dims, keepdim);
    case Op::kArgmax:
      return dims.empty() ? argmax(t, std::nullopt, keepdim) : argmax(t, dims[0], keepdim);
    case Op::kArgmin:
      return dims.empty() ? argmin(t, std::nullopt, keepdim) : argmin(t, dims[0], keepdim);
    case Op::kVar:
      return var(t, dims, param, keepdim);
    case Op::kNorm:
      return norm(t, param, dims, keepdim);
  }
  return {};
}

// Empty when `got` matches the reference of op over t; else a description of the first mismatch.
std::string mismatch(Op op, const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
                     double param = 0) {
  const Tensor got = run_op(op, t, dims, keepdim, param);
  const bool index_op = op == Op::kArgmax || op == Op::kArgmin;
  const bool all = dims.empty();
  Shape expected_shape;
  for (int64_t d = 0; d < t.dim(); ++d) {
    bool red = all;
    for (int64_t r : dims) red = red || r == d || r + t.dim() == d;
    if (!red || keepdim) expected_shape.push_back(red ? 1 : t.size(d));
  }
  const bool integral = !is_floating_point(t.dtype());
  const DType expected_dtype =
      index_op || (integral && (op == Op::kSum || op == Op::kProd)) ? kInt64 : t.dtype();
  std::ostringstream os;
  if (got.sizes() != expected_shape) os << "shape " << got.sizes() << " != " << expected_shape;
  if (got.dtype() != expected_dtype) os << " dtype " << got.dtype() << " != " << expected_dtype;
  if (!os.str().empty()) return os.str();
  const auto groups = groups_of(t, index_op && all ? std::vector<int64_t>{} : dims);
  const std::vector<double> values = got.to_vector<double>();
  const double rtol = index_op ? 0 : rtol_of(got.dtype());
  for (size_t i = 0; i < values.size(); ++i) {
    double scale = 0;
    const double want = reference(op, groups[i], param, integral, scale);
    const double have = values[i];
    const bool ok = (std::isnan(want) && std::isnan(have)) || want == have ||
                    std::abs(want - have) <= rtol * (1 + scale);
    if (!ok) {
      os << "element " << i << ": got " << have << ", want " << want;
      return os.str();
    }
  }
  return "";
}

// Same shape, dtype and values.
bool same(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         a.to_vector<double>() == b.to_vector<double>();
}

const std::vector<std::vector<int64_t>> kDimSets = {
    {}, {0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, 2}, {2, 0}, {0, 1, 2}, {-3, -1}};

}  // namespace

TEST_CASE("reductions match a float64 reference on every layout and dim set", "[reduction]") {
  struct OpCase {
    Op op;
    const char* name;
    double param;
    bool floating_only;
  };
  const std::vector<OpCase> ops = {{Op::kSum, "sum", 0, false},
                                   {Op::kProd, "prod", 0, false},
                                   {Op::kMean, "mean", 0, true},
                                   {Op::kAmax, "amax", 0, false},
                                   {Op::kAmin, "amin", 0, false},
                                   {Op::kVar, "var c=1", 1, true},
                                   {Op::kVar, "var c=0", 0, true},
                                   {Op::kNorm, "norm p=2", 2, true},
                                   {Op::kNorm, "norm p=1", 1, true},
                                   {Op::kNorm, "norm p=0", 0, true},
                                   {Op::kNorm, "norm p=3", 3, true},
                                   {Op::kNorm, "norm p=0.5", 0.5, true},
                                   {Op::kNorm, "norm p=-1", -1, true},
                                   {Op::kNorm, "norm p=inf", kInf, true},
                                   {Op::kNorm, "norm p=-inf", -kInf, true}};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32}) {
    for (const Layout& layout : layouts(dt)) {
      for (const OpCase& c : ops) {
        if (c.floating_only && !is_floating_point(dt)) continue;
        for (const auto& dims : kDimSets) {
          for (bool keepdim : {false, true}) {
            INFO(dt << " " << layout.name << " " << c.name << " dims " << Shape(dims) << " keepdim "
                    << keepdim);
            CHECK(mismatch(c.op, layout.t, dims, keepdim, c.param) == "");
          }
        }
      }
      for (Op op : {Op::kArgmax, Op::kArgmin}) {
        for (const std::vector<int64_t>& dims :
             {std::vector<int64_t>{}, {0}, {1}, {2}, {-1}, {-3}}) {
          for (bool keepdim : {false, true}) {
            INFO(dt << " " << layout.name << " arg op dims " << Shape(dims) << " keepdim "
                    << keepdim);
            CHECK(mismatch(op, layout.t, dims, keepdim) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("max/min over a dim return values and first indices", "[reduction]") {
  for (const Layout& layout : layouts(kInt64)) {  // small integers: many ties
    for (int64_t dim : {0, 1, 2, -1}) {
      INFO(layout.name << " dim " << dim);
      auto [values, indices] = max(layout.t, dim, true);
      CHECK(same(values, amax(layout.t, {dim}, true)));
      CHECK(same(indices, argmax(layout.t, dim, true)));
      CHECK(mismatch(Op::kArgmax, layout.t, {dim}, true) == "");
      auto [min_values, min_indices] = min(layout.t, dim);
      CHECK(mismatch(Op::kAmin, layout.t, {dim}, false) == "");
      CHECK(same(min_values, amin(layout.t, {dim})));
      CHECK(same(min_indices, argmin(layout.t, dim)));
    }
    CHECK(max(layout.t).item<int64_t>() == amax(layout.t).item<int64_t>());
    CHECK(min(layout.t).item<int64_t>() == amin(layout.t).item<int64_t>());
    CHECK(max(layout.t).dim() == 0);
  }
}

TEST_CASE("large reductions take the parallel inner and outer paths", "[reduction]") {
  const Tensor wide = random_tensor({3, 200001}, kFloat32, 11);
  const Tensor tall = random_tensor({200001, 3}, kFloat32, 12);
  const Tensor square = random_tensor({700, 900}, kFloat32, 13);
  for (const Tensor& t : {wide, tall, square, square.t(), square.slice(1, 1, 900, 3)}) {
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{0}, {1}, {}}) {
      INFO("shape " << t.sizes() << " strides " << t.strides() << " dims " << Shape(dims));
      CHECK(mismatch(Op::kSum, t, dims, false) == "");
      CHECK(mismatch(Op::kMean, t, dims, true) == "");
      CHECK(mismatch(Op::kAmax, t, dims, false) == "");
      CHECK(mismatch(Op::kVar, t, dims, false, 1) == "");
      CHECK(mismatch(Op::kNorm, t, dims, false, 2) == "");
      CHECK(mismatch(Op::kNorm, t, dims, false, kInf) == "");
      CHECK(mismatch(Op::kProd, t.slice(0, 0, 2), dims, false) == "");
      if (dims.size() == 1) {
        CHECK(mismatch(Op::kArgmax, t, dims, false) == "");
        CHECK(mismatch(Op::kArgmin, t, dims, false) == "");
      }
    }
  }
  const Tensor ints = random_tensor({1000, 700}, kInt32, 14, -1000, 1000);
  CHECK(mismatch(Op::kSum, ints, {}, false) == "");
  CHECK(mismatch(Op::kSum, ints, {0}, false) == "");
  CHECK(mismatch(Op::kAmin, ints.t(), {1}, false) == "");
}

TEST_CASE("argmax returns the first extreme, also across threads", "[reduction]") {
  Tensor t = random_tensor({1 << 20}, kFloat32, 21);
  float* p = t.data_ptr<float>();
  p[900000] = 5;
  p[100] = 5;
  p[500000] = 5;
  CHECK(argmax(t).item<int64_t>() == 100);
  CHECK(amax(t).item<float>() == 5);
  p[700] = -5;
  p[600] = -5;
  CHECK(argmin(t).item<int64_t>() == 600);
  Tensor cols = t.view({1 << 10, 1 << 10});
  CHECK(argmax(cols, 0).to_vector<int64_t>()[100] == 0);
  CHECK(mismatch(Op::kArgmax, cols, {0}, false) == "");
  CHECK(mismatch(Op::kArgmax, cols.t(), {1}, true) == "");

  Tensor neg_inf = filled({5, 3}, kFloat32, -kInf);
  CHECK(argmax(neg_inf).item<int64_t>() == 0);
  CHECK(argmax(neg_inf, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  CHECK(amax(neg_inf).item<float>() == -std::numeric_limits<float>::infinity());
  CHECK(argmin(filled({4}, kFloat32, kInf)).item<int64_t>() == 0);
}

TEST_CASE("NaN propagates through max, min, sum and norms", "[reduction]") {
  Tensor t = from_vector<float>({1, 2, 9, 4, NAN, 6, NAN, 0}, {2, 4});
  CHECK(std::isnan(amax(t).item<float>()));
  CHECK(std::isnan(amin(t).item<float>()));
  CHECK(std::isnan(max(t).item<float>()));
  CHECK(argmax(t).item<int64_t>() == 4);
  CHECK(argmin(t).item<int64_t>() == 4);
  auto [values, indices] = max(t, 1);
  CHECK(values.to_vector<float>()[0] == 9);
  CHECK(std::isnan(values.to_vector<float>()[1]));
  CHECK(indices.to_vector<int64_t>() == std::vector<int64_t>{2, 0});
  CHECK(std::isnan(sum(t).item<float>()));
  CHECK(std::isnan(norm(t, kInf).item<float>()));
  CHECK(std::isnan(norm(t, -kInf).item<float>()));
  for (const auto& dims : kDimSets) {
    if (dims.size() > 1 || (dims.size() == 1 && (dims[0] == 2 || dims[0] == -3))) continue;
    INFO("dims " << Shape(dims));
    CHECK(mismatch(Op::kAmax, t, dims, false) == "");
    CHECK(mismatch(Op::kAmin, t.t(), dims, false) == "");
  }
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (int64_t pos : {0, 15, 16, 31, 32, 95, 96, 99}) {  // vector bodies and scalar tails
      INFO(dt << " NaN at " << pos);
      std::vector<double> v = random_tensor({100}, kFloat64, 23).to_vector<double>();
      v[static_cast<size_t>(pos)] = kNaN;
      const Tensor x = from_vector<double>(v, {100}).to(dt);
      CHECK(std::isnan(amax(x).item<double>()));
      CHECK(std::isnan(amin(x).item<double>()));
      CHECK(argmax(x).item<int64_t>() == pos);
      CHECK(argmin(x).item<int64_t>() == pos);
    }
  }
  Tensor big = random_tensor({1 << 20}, kFloat32, 22);
  big.data_ptr<float>()[777777] = NAN;
  big.data_ptr<float>()[999999] = NAN;
  CHECK(std::isnan(amax(big).item<float>()));
  CHECK(argmax(big).item<int64_t>() == 777777);
  CHECK(argmin(big).item<int64_t>() == 777777);
}

TEST_CASE("float32 sums are accurate: 16M ones sum to exactly 16777216", "[reduction]") {
  const int64_t n = int64_t{1} << 24;
  Tensor ones_flat = filled({n}, kFloat32, 1.0);
  CHECK(sum(ones_flat).item<double>() == 16777216.0);
  CHECK(mean(ones_flat).item<double>() == 1.0);
  CHECK(norm(ones_flat, 1).item<double>() == 16777216.0);
  CHECK(norm(ones_flat).item<double>() == 4096.0);
  Tensor square = ones_flat.view({4096, 4096});
  CHECK(sum(square.t()).item<double>() == 16777216.0);
  CHECK(sum(square, {0}).to_vector<float>() == std::vector<float>(4096, 4096.0f));
  CHECK(sum(ones_flat.view({1 << 22, 4}), {0}).to_vector<float>() ==
        std::vector<float>(4, 4194304.0f));
  CHECK(sum(filled({1}, kFloat32, 1.0).expand({n})).item<double>() == 16777216.0);
  // bfloat16 accumulates in float as well.
  CHECK(sum(filled({1 << 20}, kBFloat16, 1.0), {}, false, kFloat32).item<double>() == 1048576.0);
  CHECK(sum(filled({1 << 16}, kBFloat16, 1.0)).item<double>() == 65536.0);
}

TEST_CASE("var is stable for data with a large mean", "[reduction]") {
  std::vector<double> v = random_tensor({100000}, kFloat64, 31, -1, 1).to_vector<double>();
  for (double& e : v) e += 1e6;
  const Tensor x = from_vector<double>(v, {100000}).to(kFloat32);
  const std::vector<double> xs = x.to_vector<double>();
  double m = 0;
  for (double e : xs) m += e;
  m /= static_cast<double>(xs.size());
  double m2 = 0;
  for (double e : xs) m2 += (e - m) * (e - m);
  const double want = m2 / static_cast<double>(xs.size() - 1);
  CHECK(var(x).item<double>() == Approx(want).epsilon(1e-4));
  CHECK(var(x.view({1000, 100}).t(), {1, 0}).item<double>() == Approx(want).epsilon(1e-4));
  const Tensor cols = var(x.view({25000, 4}), {0});
  const Tensor rows = var(x.view({4, 25000}), {1});
  for (const Tensor& r : {cols, rows}) {
    for (double got : r.to_vector<double>()) CHECK(got == Approx(want).epsilon(0.05));
  }
  CHECK(mismatch(Op::kVar, x.view({25000, 4}), {0}, false, 1) == "");
  CHECK(mismatch(Op::kVar, x.view({4, 25000}), {1}, false, 1) == "");
}

TEST_CASE("var with correction >= N gives inf or nan", "[reduction]") {
  Tensor t = from_vector<double>({1, 3}, {2});
  CHECK(var(t, {}, 1).item<double>() == 2.0);
  CHECK(var(t, {}, 0).item<double>() == 1.0);
  CHECK(std::isinf(var(t, {}, 2).item<double>()));
  CHECK(std::isinf(var(t, {}, 5).item<double>()));
  CHECK(std::isnan(var(from_vector<double>({7}, {1})).item<double>()));
  CHECK(var(from_vector<double>({7}, {1}), {}, 0).item<double>() == 0.0);
}

TEST_CASE("reductions over zero-size dims", "[reduction]") {
  Tensor e = Tensor::make_empty({0, 3}, kFloat32, Device::cpu());
  CHECK(sum(e, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(sum(e, {1}).sizes() == Shape{0});
  CHECK(sum(e).item<float>() == 0);
  CHECK(sum(e, {0}, true).sizes() == Shape{1, 3});
  CHECK(prod(e, {0}).to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(sum(Tensor::make_empty({0, 3}, kInt32, Device::cpu())).item<int64_t>() == 0);
  CHECK(std::isnan(mean(e, {0}).to_vector<float>()[0]));
  CHECK(std::isnan(var(e, {0}).to_vector<float>()[1]));
  CHECK(norm(e, 2, {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(norm(e, 0).item<float>() == 0);
  CHECK(amax(e, {1}).sizes() == Shape{0});
  CHECK(argmax(e, 1).sizes() == Shape{0});
  CHECK(max(e, 1).first.sizes() == Shape{0});
  CHECK(norm(e, kInf, {1}).sizes() == Shape{0});
  CHECK_THROWS_WITH(amax(e, {0}), Catch::Contains("[amax]") && Catch::Contains("non-zero size") &&
                                      Catch::Contains("[0, 3]"));
  CHECK_THROWS_WITH(amin(e, {0, 1}), Catch::Contains("[amin]") && Catch::Contains("dim 0"));
  CHECK_THROWS_WITH(amax(e), Catch::Contains("[amax]"));
  CHECK_THROWS_AS(max(e), IndexError);
  CHECK_THROWS_WITH(max(e), Catch::Contains("[max]") && Catch::Contains("numel() == 0"));
  CHECK_THROWS_WITH(max(e, 0), Catch::Contains("[max]") && Catch::Contains("non-zero size"));
  CHECK_THROWS_WITH(min(e, -2), Catch::Contains("[min]"));
  CHECK_THROWS_WITH(argmax(e), Catch::Contains("[argmax]"));
  CHECK_THROWS_WITH(argmin(e, 0), Catch::Contains("[argmin]"));
  CHECK_THROWS_WITH(norm(e, kInf), Catch::Contains("[norm]") && Catch::Contains("identity"));
  CHECK_THROWS_WITH(norm(e, -1), Catch::Contains("[norm]") && Catch::Contains("negative"));
}

TEST_CASE("reductions of 0-dim tensors", "[reduction]") {
  Tensor s = from_vector<float>({3.5f}, Shape{});
  REQUIRE(s.dim() == 0);
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {0}, {-1}}) {
    for (bool keepdim : {false, true}) {
      CHECK(sum(s, dims, keepdim).sizes() == Shape{});
      CHECK(sum(s, dims, keepdim).item<float>() == 3.5f);
      CHECK(amax(s, dims, keepdim).item<float>() == 3.5f);
      CHECK(norm(s, 2, dims, keepdim).item<float>() == 3.5f);
      CHECK(std::isnan(var(s, dims, 1, keepdim).item<float>()));
    }
  }
  CHECK(prod(s).item<float>() == 3.5f);
  CHECK(mean(s).item<float>() == 3.5f);
  CHECK(var(s, {}, 0).item<float>() == 0);
  CHECK(argmax(s).item<int64_t>() == 0);
  CHECK(argmax(s, 0, true).sizes() == Shape{});
  auto [v, i] = max(s, -1);
  CHECK(v.item<float>() == 3.5f);
  CHECK(i.item<int64_t>() == 0);
  CHECK(max(s).item<float>() == 3.5f);
  CHECK_THROWS_WITH(sum(s, {1}), Catch::Contains("[sum]") && Catch::Contains("[-1, 0]"));
}

TEST_CASE("reduction result dtypes follow PyTorch", "[reduction]") {
  Tensor b = from_vector<bool>({true, false, true, true}, {2, 2});
  CHECK(sum(b).dtype() == kInt64);
  CHECK(sum(b).item<int64_t>() == 3);
  CHECK(sum(b, {0}).to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  CHECK(prod(b).item<int64_t>() == 0);
  CHECK(amax(b).dtype() == kBool);
  CHECK(amax(b).item<bool>());
  CHECK(!amin(b).item<bool>());
  CHECK_THROWS_WITH(argmin(b), Catch::Contains("[argmin]") && Catch::Contains("bool"));
  CHECK(max(b, 1).second.to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  Tensor i = from_vector<int32_t>({1, -2, 3, 4}, {2, 2});
  CHECK(sum(i).dtype() == kInt64);
  CHECK(sum(i).item<int64_t>() == 6);
  CHECK(prod(i).item<int64_t>() == -24);
  CHECK(sum(i, {}, false, kInt32).dtype() == kInt32);
  CHECK(sum(i, {1}, false, kFloat64).to_vector<double>() == std::vector<double>{-1, 7});
  CHECK(amax(i).dtype() == kInt32);
  Tensor big = from_vector<int64_t>({int64_t{1} << 62, int64_t{1} << 62}, {2});
  CHECK(sum(big).item<int64_t>() == std::numeric_limits<int64_t>::min());  // wraps, as PyTorch
  Tensor f = from_vector<float>({0.5f, 1.5f}, {2});
  CHECK(sum(f, {}, false, kFloat64).dtype() == kFloat64);
  CHECK(sum(f, {}, false, kInt64).item<int64_t>() == 1);  // cast first: 0 + 1
  CHECK(mean(f.to(kFloat16)).dtype() == kFloat16);
  CHECK(mean(f.to(kBFloat16)).item<float>() == 1.0f);
  CHECK(var(f.to(kFloat64)).dtype() == kFloat64);
  CHECK(norm(f.to(kBFloat16)).dtype() == kBFloat16);
}

TEST_CASE("reduction errors name the op, the dims and the dtype", "[reduction]") {
  Tensor t = random_tensor({2, 3, 4}, kFloat32, 41);
  CHECK_THROWS_AS(sum(t, {3}), IndexError);
  CHECK_THROWS_WITH(sum(t, {3}),
                    Catch::Contains("[sum]") && Catch::Contains("3") && Catch::Contains("[-3, 2]"));
  CHECK_THROWS_WITH(amax(t, {-4}), Catch::Contains("[amax]") && Catch::Contains("-4"));
  CHECK_THROWS_WITH(argmax(t, 5), Catch::Contains("[argmax]"));
  CHECK_THROWS_WITH(max(t, 3), Catch::Contains("[max]"));
  CHECK_THROWS_WITH(var(t, {0, 7}), Catch::Contains("[var]"));
  CHECK_THROWS_AS(sum(t, {1, -2}), IndexError);
  CHECK_THROWS_WITH(sum(t, {1, -2}),
                    Catch::Contains("[sum]") && Catch::Contains("dim 1 appears multiple times"));
  CHECK_THROWS_WITH(norm(t, 2, {0, 0}), Catch::Contains("[norm]"));
  Tensor ints = random_tensor({2, 3}, kInt64, 42);
  CHECK_THROWS_AS(mean(ints), DTypeError);
  CHECK_THROWS_WITH(mean(ints), Catch::Contains("[mean]") && Catch::Contains("int64") &&
                                    Catch::Contains("floating point"));
  CHECK_THROWS_WITH(mean(ints.to(kBool), {0}),
                    Catch::Contains("[mean]") && Catch::Contains("bool"));
  CHECK_THROWS_WITH(var(ints), Catch::Contains("[var]") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(norm(ints), Catch::Contains("[norm]") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(sum(Tensor()), Catch::Contains("undefined"));
}
