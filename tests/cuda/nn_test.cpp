// CUDA nn kernels (softmax, log_softmax, layer_norm, rms_norm, embedding, embedding_backward,
// nll_loss through cross_entropy) against their CPU twins through the public API, on contiguous,
// transposed, sliced, expanded and zero-size inputs and long rows; and the one-pass backward
// kernels of softmax, the norms and cross_entropy (Note [Fused nn backward]) through autograd
// against the CPU's.

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/autograd/autograd.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_internal.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_compare.h"
#include "tests/cuda/cuda_test_util.h"

namespace ts = tessera;

namespace {

using cuda_test::dtype_str;
using cuda_test::kCuda;
using cuda_test::Layout;

ts::Tensor random_values(const ts::Shape& shape, ts::DType dtype, uint64_t seed, double scale = 4.0,
                         double offset = 0.0) {
  ts::Generator gen(seed);
  return ((ts::rand(shape, ts::kFloat64, &gen) - 0.5) * scale + offset).to(dtype);
}

// Floating results within a few ulps of their dtype (device exp/log round differently from the
// host's and rows are summed in another order); integers exactly.
void check_close(const ts::Tensor& expected, const ts::Tensor& got_cuda, const std::string& what,
                 double scale = 1.0) {
  cuda_test::check_close(expected, got_cuda, what,
                         {{1e-5 * scale, 1e-6 * scale},
                          {1e-12 * scale, 1e-13 * scale},
                          {1e-2 * scale, 1e-2 * scale},
                          {2e-3 * scale, 1e-3 * scale}});
}

// Every layout has shape [4, 7, 9] except zero-size ones.
std::vector<Layout> layouts() {
  return {
      {"contiguous", {4, 7, 9}, [](const ts::Tensor& t) { return t; }},
      {"transposed",
       {9, 7, 4},
       [](const ts::Tensor& t) {
         return t.permute({2, 1, 0});
       }},
      {"inner transposed", {4, 9, 7}, [](const ts::Tensor& t) { return t.transpose(1, 2); }},
      {"sliced with step",
       {8, 7, 19},
       [](const ts::Tensor& t) { return t.slice(0, 0, 8, 2).slice(2, 1, 19, 2); }},
      {"expand-broadcast",
       {4, 1, 9},
       [](const ts::Tensor& t) {
         return t.expand({4, 7, 9});
       }},
      {"zero-size", {4, 0, 9}, [](const ts::Tensor& t) { return t; }},
  };
}

const std::vector<ts::DType> kFloats = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16};

}  // namespace

TEST_CASE("cuda softmax and log_softmax match the CPU along every dim and layout", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 1;
  for (const Layout& layout : layouts()) {
    for (ts::DType dtype : kFloats) {
      const ts::Tensor base = random_values(layout.base_shape, dtype, seed++, 8.0);
      const ts::Tensor cpu = layout.view(base);
      const ts::Tensor cuda = layout.view(base.to(kCuda));
      for (int64_t dim : {0, 1, 2, -1}) {
        const std::string what =
            layout.name + " " + dtype_str(dtype) + " dim " + std::to_string(dim);
        check_close(ts::softmax(cpu, dim), ts::softmax(cuda, dim), "softmax " + what);
        check_close(ts::log_softmax(cpu, dim), ts::log_softmax(cuda, dim), "log_softmax " + what);
      }
    }
  }
  const ts::Tensor s = ts::full({}, 3.0);
  check_close(ts::softmax(s, 0), ts::softmax(s.to(kCuda), 0), "0-dim softmax");
}

TEST_CASE("cuda softmax of long rows or columns and masked logits", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : {ts::kFloat32, ts::kBFloat16, ts::kFloat64}) {
    const ts::Tensor rows = random_values({33, 4099}, dtype, 10, 20.0);
    for (int64_t dim : {1, 0}) {
      const std::string what = "[33, 4099] " + dtype_str(dtype) + " dim " + std::to_string(dim);
      check_close(ts::softmax(rows, dim), ts::softmax(rows.to(kCuda), dim), "softmax " + what);
      check_close(ts::log_softmax(rows, dim), ts::log_softmax(rows.to(kCuda), dim),
                  "log_softmax " + what);
    }
    const ts::Tensor wide = random_values({2, 1 << 17}, dtype, 11, 20.0);
    check_close(ts::softmax(wide, 1), ts::softmax(wide.to(kCuda), 1), "softmax 1<<17 row");
  }
  // -inf logits get probability exactly 0 and leave the rest intact; a large offset is harmless.
  const double inf = std::numeric_limits<double>::infinity();
  const ts::Tensor masked =
      ts::from_vector<double>({1000, -inf, 1001, 999, -inf, -inf, 0, 5}, {2, 4}).to(ts::kFloat32);
  const ts::Tensor p = ts::softmax(masked.to(kCuda), 1).cpu();
  check_close(ts::softmax(masked, 1), ts::softmax(masked.to(kCuda), 1), "masked softmax");
  check_close(ts::log_softmax(masked, 1), ts::log_softmax(masked.to(kCuda), 1),
              "masked log_softmax");
  CHECK(p.data_ptr<float>()[1] == 0.0f);
  CHECK(p.data_ptr<float>()[4] == 0.0f);
  // A +inf logit makes its row NaN on both devices, along rows and along columns.
  const ts::Tensor with_inf =
      ts::from_vector<double>({1, inf, 2, 3, 4, 5}, {2, 3}).to(ts::kFloat32);
  for (int64_t dim : {0, 1}) {
    check_close(ts::softmax(with_inf, dim), ts::softmax(with_inf.to(kCuda), dim), "+inf softmax");
    check_close(ts::log_softmax(with_inf, dim), ts::log_softmax(with_inf.to(kCuda), dim),
                "+inf log_softmax");
  }
}

TEST_CASE("cuda layer_norm and rms_norm match the CPU with their statistics", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 20;
  for (const Layout& layout : layouts()) {
    for (ts::DType dtype : kFloats) {
      const ts::Tensor base = random_values(layout.base_shape, dtype, seed++, 4.0, 3.0);
      const ts::Tensor cpu = layout.view(base);
      const ts::Tensor cuda = layout.view(base.to(kCuda));
      for (int64_t k : {1, 2}) {
        const ts::Shape shape(cpu.sizes().end() - k, cpu.sizes().end());
        // layer_norm wants weight of x's dtype (float32 also allowed for reduced floats).
        const ts::DType wt = dtype == ts::kBFloat16 ? ts::kFloat32 : dtype;
        const ts::Tensor w = random_values(shape, wt, seed++, 1.0, 1.0);
        const ts::Tensor b = random_values(shape, wt, seed++);
        const std::string what =
            layout.name + " " + dtype_str(dtype) + " over " + std::to_string(k) + " dims";
        for (int mode = 0; mode < 3; ++mode) {  // no params, weight only, weight and bias
          const ts::Tensor wc = mode > 0 ? w : ts::Tensor();
          const ts::Tensor bc = mode > 1 ? b : ts::Tensor();
          const ts::Tensor wg = mode > 0 ? w.to(kCuda) : ts::Tensor();
          const ts::Tensor bg = mode > 1 ? b.to(kCuda) : ts::Tensor();
          const auto e = ts::detail::layer_norm_forward(cpu, shape, wc, bc, 1e-5);
          const auto g = ts::detail::layer_norm_forward(cuda, shape, wg, bg, 1e-5);
          const std::string m = what + " mode " + std::to_string(mode);
          check_close(e.out, g.out, "layer_norm " + m, 4.0);
          if (cpu.numel() > 0) {  // an empty input leaves the statistics unwritten
            check_close(e.mean, g.mean, "layer_norm mean " + m, 4.0);
            check_close(e.rstd, g.rstd, "layer_norm rstd " + m, 4.0);
          }
          const auto er = ts::detail::rms_norm_forward(cpu, shape, wc, std::nullopt);
          const auto gr = ts::detail::rms_norm_forward(cuda, shape, wg, std::nullopt);
          check_close(er.out, gr.out, "rms_norm " + m, 4.0);
          if (cpu.numel() > 0) check_close(er.rstd, gr.rstd, "rms_norm rstd " + m, 4.0);
        }
      }
    }
  }
}

TEST_CASE("cuda norms of long rows and a large mean match the CPU", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : {ts::kFloat32, ts::kBFloat16, ts::kFloat64}) {
    for (const ts::Shape& shape :
         {ts::Shape{16, 4099}, ts::Shape{3, 1 << 16}, ts::Shape{300, 64}}) {
      const ts::Tensor x = random_values(shape, dtype, 30, 4.0, 1e3);
      const ts::Shape norm_shape{shape[1]};
      // layer_norm wants weight of x's dtype (or float32 for bfloat16); rms_norm any floating.
      const ts::Tensor w =
          random_values(norm_shape, dtype == ts::kBFloat16 ? ts::kFloat32 : dtype, 31);
      const std::string what = dtype_str(dtype) + " rows of " + std::to_string(shape[1]);
      check_close(ts::layer_norm(x, norm_shape, w),
                  ts::layer_norm(x.to(kCuda), norm_shape, w.to(kCuda)), "layer_norm " + what, 20.0);
      check_close(ts::rms_norm(x, norm_shape, w),
                  ts::rms_norm(x.to(kCuda), norm_shape, w.to(kCuda)), "rms_norm " + what, 4.0);
    }
  }
}

TEST_CASE("cuda embedding gathers rows of every layout and dtype", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor idx64 = ts::from_vector<int64_t>({3, 0, 9, 3, 3, 7, 1, 0, 2, 9, 5, 4}, {3, 4});
  for (ts::DType dtype :
       {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16, ts::kInt64, ts::kUInt8}) {
    for (int64_t d : {1, 3, 8, 16, 129}) {  // unit sizes of 1 to 16 bytes
      const ts::Tensor weight = random_values({10, d}, ts::kFloat64, 40, 100.0).to(dtype);
      const ts::Tensor wt = random_values({d, 10}, ts::kFloat64, 41, 100.0).to(dtype).t();
      const ts::Tensor wsliced =
          random_values({10, d + 1}, ts::kFloat64, 42, 100.0).to(dtype).narrow(1, 1, d);
      for (ts::DType it : {ts::kInt64, ts::kInt32}) {
        const ts::Tensor idx = idx64.to(it);
        const std::string what = dtype_str(dtype) + " d " + std::to_string(d) + " " + dtype_str(it);
        for (const ts::Tensor& w : {weight, wt, wsliced}) {
          const ts::Tensor expected = ts::embedding(w, idx);
          const ts::Tensor got = ts::embedding(w.to(kCuda), idx.to(kCuda));
          INFO(what);
          CHECK(ts::equal(got.cpu(), expected));
        }
      }
    }
  }
  const ts::Tensor none =
      ts::embedding(ts::ones({4, 3}).to(kCuda), ts::zeros({0}, ts::kInt64).to(kCuda));
  CHECK(none.sizes() == ts::Shape{0, 3});
  CHECK_THROWS_AS(
      ts::embedding(ts::ones({4, 3}).to(kCuda), ts::from_vector<int64_t>({4}, {1}).to(kCuda)),
      ts::Error);
}

TEST_CASE("cuda embedding_backward sums repeated indices in order bitwise as the CPU",
          "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  ts::Generator gen(50);
  for (ts::DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16}) {
    for (const auto& [n, v, d] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {12, 10, 7}, {5000, 10, 64}, {4096, 50000, 33}, {1, 1, 1}}) {
      const ts::Tensor idx = ts::randint(0, v, {n}, ts::kInt64, &gen);
      const ts::Tensor grad = random_values({n, d}, dtype, static_cast<uint64_t>(n + d));
      const std::string what = dtype_str(dtype) + " n " + std::to_string(n) + " V " +
                               std::to_string(v) + " D " + std::to_string(d);
      INFO(what);
      const ts::Tensor expected = ts::detail::embedding_backward(grad, idx, v);
      for (const ts::Tensor& i : {idx, idx.to(ts::kInt32)}) {
        const ts::Tensor got = ts::detail::embedding_backward(grad.to(kCuda), i.to(kCuda), v);
        REQUIRE(got.device() == kCuda);
        // Same summation order as the CPU (see Note [Deterministic embedding backward]).
        CHECK(ts::equal(got.cpu(), expected));
      }
      // Column-major grad: strided rows.
      const ts::Tensor strided = grad.to(kCuda).t().contiguous().t();
      CHECK(ts::equal(ts::detail::embedding_backward(strided, idx.to(kCuda), v).cpu(), expected));
    }
  }
}

TEST_CASE("cuda embedding gradient through autograd matches the CPU", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor idx = ts::from_vector<int64_t>({2, 0, 2, 2, 3, 0}, {2, 3});
  const ts::Tensor w0 = random_values({4, 5}, ts::kFloat32, 60);
  const ts::Tensor up = random_values({2, 3, 5}, ts::kFloat32, 61);
  ts::Tensor wc = w0.clone();
  wc.requires_grad_(true);
  ts::sum(ts::embedding(wc, idx) * up).backward();
  ts::Tensor wg = w0.to(kCuda);
  wg.requires_grad_(true);
  ts::sum(ts::embedding(wg, idx.to(kCuda)) * up.to(kCuda)).backward();
  REQUIRE(wg.grad().defined());
  check_close(wc.grad(), wg.grad(), "embedding weight gradient");
}

TEST_CASE("cuda cross_entropy (log_softmax + nll_loss) matches the CPU", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  ts::Generator gen(70);
  for (ts::DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16}) {
    for (const ts::Shape& shape : {ts::Shape{16, 10}, ts::Shape{5, 4099}, ts::Shape{4, 6, 3},
                                   ts::Shape{0, 5}, ts::Shape{7}}) {
      const ts::Tensor logits = random_values(shape, dtype, 71, 10.0);
      const int64_t c = shape.ndim() == 1 ? shape[0] : shape[1];
      ts::Shape tshape;
      if (shape.ndim() > 1) {
        tshape.push_back(shape[0]);
        for (int64_t d = 2; d < shape.ndim(); ++d) tshape.push_back(shape[d]);
      }
      ts::Tensor target = ts::randint(0, c, tshape, ts::kInt64, &gen);
      if (target.numel() > 2) {  // two ignored samples
        int64_t* t = target.data_ptr<int64_t>();
        t[1] = -100;
        t[target.numel() - 1] = -100;
      }
      for (double smoothing : {0.0, 0.1, 1.0}) {
        for (ts::Reduction reduction :
             {ts::Reduction::None, ts::Reduction::Mean, ts::Reduction::Sum}) {
          const ts::CrossEntropyOptions opts{-100, smoothing, reduction};
          const std::string what = dtype_str(dtype) + " shape ndim " +
                                   std::to_string(shape.ndim()) + " c " + std::to_string(c) +
                                   " smoothing " + std::to_string(smoothing) + " reduction " +
                                   std::to_string(static_cast<int>(reduction));
          check_close(ts::cross_entropy(logits, target, opts),
                      ts::cross_entropy(logits.to(kCuda), target.to(kCuda), opts), what, 4.0);
        }
      }
    }
  }
  // A strided (transposed) logits matrix.
  const ts::Tensor lt = random_values({10, 16}, ts::kFloat32, 72).t();
  const ts::Tensor tt = ts::randint(0, 10, {16}, ts::kInt64, &gen);
  const ts::CrossEntropyOptions none{-100, 0.2, ts::Reduction::None};
  check_close(ts::cross_entropy(lt, tt, none), ts::cross_entropy(lt.to(kCuda), tt.to(kCuda), none),
              "transposed logits");
}

namespace {

using Leaves = std::vector<ts::Tensor>;

// A differentiable function of some leaves: the first is the input (cast to the dtype under
// test), the others are norm parameters (float32 for a bfloat16 input, as layer_norm allows).
struct GradCase {
  std::string name;
  Leaves leaves;  // float64 values
  std::function<ts::Tensor(const Leaves&)> fn;
};

ts::Tensor masked_scores(const ts::Shape& shape, uint64_t seed) {
  // Additive causal mask over the last two dims (-inf above the diagonal), as attention scores.
  const int64_t n = shape[shape.size() - 1];
  std::vector<double> m(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) {
      m[static_cast<size_t>(i * n + j)] = -std::numeric_limits<double>::infinity();
    }
  }
  return random_values(shape, ts::kFloat64, seed, 6.0) + ts::from_vector(m, {n, n});
}

std::vector<GradCase> softmax_grad_cases() {
  std::vector<GradCase> c;
  for (const bool log : {false, true}) {
    const auto op = log ? &ts::log_softmax : &ts::softmax;
    const std::string name = log ? "log_softmax" : "softmax";
    const auto along = [op](int64_t dim) {
      return [op, dim](const Leaves& x) { return op(x[0], dim); };
    };
    c.push_back({name + " last dim", {random_values({6, 33}, ts::kFloat64, 101, 6.0)}, along(-1)});
    c.push_back(
        {name + " dim 1 of three", {random_values({4, 5, 6}, ts::kFloat64, 102, 6.0)}, along(1)});
    c.push_back({name + " dim 0", {random_values({7, 5}, ts::kFloat64, 103, 6.0)}, along(0)});
    for (int64_t dim : {-1, 0}) {
      c.push_back({name + " transposed input dim " + std::to_string(dim),
                   {random_values({9, 5}, ts::kFloat64, 104, 6.0)},
                   [op, dim](const Leaves& x) { return op(x[0].t(), dim); }});
    }
    c.push_back(
        {name + " long rows", {random_values({3, 4099}, ts::kFloat64, 105, 6.0)}, along(-1)});
    c.push_back({name + " masked", {masked_scores({2, 3, 8, 8}, 106)}, along(-1)});
  }
  return c;
}

std::vector<GradCase> norm_grad_cases() {
  const auto x = [](const ts::Shape& shape, uint64_t seed) {
    return random_values(shape, ts::kFloat64, seed, 4.0, 1.0);
  };
  const auto p = [](int64_t n, uint64_t seed) {
    return random_values({n}, ts::kFloat64, seed, 1.0, 1.0);
  };
  std::vector<GradCase> c;
  c.push_back({"layer_norm weight and bias",
               {x({4, 6, 40}, 111), p(40, 112), p(40, 113)},
               [](const Leaves& l) { return ts::layer_norm(l[0], {40}, l[1], l[2]); }});
  c.push_back(
      {"layer_norm over two dims without weight or bias", {x({5, 3, 7}, 114)}, [](const Leaves& l) {
         return ts::layer_norm(l[0], {3, 7});
       }});
  c.push_back({"layer_norm over two dims with weight and bias",
               {x({5, 3, 7}, 115), random_values({3, 7}, ts::kFloat64, 116),
                random_values({3, 7}, ts::kFloat64, 117)},
               [](const Leaves& l) {
                 return ts::layer_norm(l[0], {3, 7}, l[1], l[2]);
               }});
  c.push_back({"layer_norm transposed input, weight only",
               {x({8, 6}, 118), p(8, 119)},
               [](const Leaves& l) { return ts::layer_norm(l[0].t(), {8}, l[1]); }});
  c.push_back({"layer_norm long rows",
               {x({5, 4099}, 120), p(4099, 121), p(4099, 122)},
               [](const Leaves& l) { return ts::layer_norm(l[0], {4099}, l[1], l[2]); }});
  c.push_back({"rms_norm with weight", {x({9, 24}, 123), p(24, 124)}, [](const Leaves& l) {
                 return ts::rms_norm(l[0], {24}, l[1]);
               }});
  c.push_back({"rms_norm over two dims without weight", {x({3, 2, 5}, 125)}, [](const Leaves& l) {
                 return ts::rms_norm(l[0], {2, 5});
               }});
  // Several chunks of rows sum the weight and bias gradients (kernels/cuda/norm.cu).
  c.push_back({"layer_norm 700 x 96",
               {x({700, 96}, 126), p(96, 127), p(96, 128)},
               [](const Leaves& l) { return ts::layer_norm(l[0], {96}, l[1], l[2]); }});
  c.push_back({"rms_norm 700 x 96", {x({700, 96}, 129), p(96, 130)}, [](const Leaves& l) {
                 return ts::rms_norm(l[0], {96}, l[1]);
               }});
  return c;
}

std::vector<GradCase> cross_entropy_grad_cases() {
  std::vector<GradCase> c;
  const ts::Tensor target = ts::from_vector<int64_t>({2, 0, -100, 4, 1, 4}, {6});
  for (const ts::Reduction r : {ts::Reduction::Mean, ts::Reduction::Sum, ts::Reduction::None}) {
    for (const double ls : {0.0, 0.2}) {
      const ts::CrossEntropyOptions o{-100, ls, r};
      c.push_back({"cross_entropy reduction " + std::to_string(static_cast<int>(r)) +
                       " smoothing " + std::to_string(ls),
                   {random_values({6, 5}, ts::kFloat64, 141, 6.0)},
                   [target, o](const Leaves& l) {
                     return ts::cross_entropy(l[0], target.to(l[0].device()), o);
                   }});
    }
  }
  const ts::Tensor target3 = ts::from_vector<int64_t>({1, 0, -100, 2, 0, 1}, {2, 3});
  c.push_back({"cross_entropy [N, C, d] smoothing 0.1",
               {random_values({2, 3, 3}, ts::kFloat64, 142, 6.0)},
               [target3](const Leaves& l) {
                 return ts::cross_entropy(l[0], target3.to(l[0].device()),
                                          {-100, 0.1, ts::Reduction::Mean});
               }});
  const ts::Tensor target1 = ts::from_vector<int64_t>({3}, {});
  c.push_back({"cross_entropy [C]",
               {random_values({7}, ts::kFloat64, 143, 6.0)},
               [target1](const Leaves& l) {
                 return ts::cross_entropy(l[0], target1.to(l[0].device()),
                                          {-100, 0.0, ts::Reduction::None});
               }});
  const ts::Tensor target_long = ts::from_vector<int64_t>({4098, 7, 0, 7, 2000}, {5});
  c.push_back({"cross_entropy 4099 classes, ignore_index 7",
               {random_values({5, 4099}, ts::kFloat64, 144, 6.0)},
               [target_long](const Leaves& l) {
                 return ts::cross_entropy(l[0], target_long.to(l[0].device()),
                                          {7, 0.1, ts::Reduction::Mean});
               }});
  const ts::Tensor ignored = ts::from_vector<int64_t>({-100, -100}, {2});
  c.push_back(
      {"cross_entropy every target ignored",
       {random_values({2, 5}, ts::kFloat64, 145, 6.0)},
       [ignored](const Leaves& l) { return ts::cross_entropy(l[0], ignored.to(l[0].device())); }});
  return c;
}

// The gradients of the case's function at its leaves (cast for `dtype`, on `device`) for a
// random output gradient, through autograd without create_graph: where the device has the
// one-pass kernels, they compute it (Note [Fused nn backward]).
Leaves fused_gradients(const GradCase& c, ts::DType dtype, ts::Device device) {
  const ts::DType param = dtype == ts::kBFloat16 ? ts::kFloat32 : dtype;
  Leaves leaves;
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    // detach: to() may return the case's own tensor, which must stay a plain value.
    leaves.push_back(c.leaves[i].to(i == 0 ? dtype : param).to(device).detach().requires_grad_());
  }
  const ts::Tensor out = c.fn(leaves);
  const ts::Tensor v = random_values(out.sizes(), out.dtype(), 150, 2.0).to(device);
  return ts::autograd::grad({out}, leaves, {v});
}

// CUDA's against the CPU's, within check_close's tolerances times `scale`.
void check_fused_gradients(const std::vector<GradCase>& cases, double scale) {
  for (const GradCase& c : cases) {
    for (ts::DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16}) {
      const Leaves expected = fused_gradients(c, dtype, ts::Device::cpu());
      const Leaves got = fused_gradients(c, dtype, kCuda);
      REQUIRE(got.size() == expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        check_close(expected[i], got[i],
                    c.name + " " + dtype_str(dtype) + " gradient " + std::to_string(i), scale);
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda registers the one-pass nn backward kernels", "[cuda][nn]") {
  // The table is filled without a device; has_fused_nn_backward needs a CUDA tensor.
  const ts::KernelTable& k = ts::kernels(ts::DeviceType::CUDA, "nn backward test");
  CHECK(k.softmax_backward != nullptr);
  CHECK(k.norm_backward != nullptr);
  CHECK(k.cross_entropy_backward != nullptr);
  TS_REQUIRE_CUDA_DEVICE();
  CHECK(ts::detail::has_fused_nn_backward(ts::zeros({1}).to(kCuda)));
}

TEST_CASE("cuda softmax and log_softmax gradients match the CPU's one-pass kernels", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  check_fused_gradients(softmax_grad_cases(), 4.0);
}

TEST_CASE("cuda layer_norm and rms_norm gradients match the CPU's one-pass kernels", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  check_fused_gradients(norm_grad_cases(), 10.0);
}

TEST_CASE("cuda cross_entropy gradients match the CPU's one-pass kernels", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  check_fused_gradients(cross_entropy_grad_cases(), 4.0);
}

TEST_CASE("cuda masked softmax gradients are exactly zero where masked", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor s = masked_scores({1, 1, 16, 16}, 160).to(ts::kFloat32).to(kCuda);
  for (const bool log : {false, true}) {
    const ts::Tensor x = s.detach().requires_grad_();
    const ts::Tensor y = log ? ts::log_softmax(x, -1) : ts::softmax(x, -1);
    const ts::Tensor v = random_values(y.sizes(), ts::kFloat32, 161).to(kCuda);
    const ts::Tensor g = ts::autograd::grad({y}, {x}, {v})[0].cpu().contiguous();
    const ts::Tensor vc = v.cpu();
    const float* gp = g.data_ptr<float>();
    const float* vp = vc.data_ptr<float>();
    // A masked entry has probability 0, so gradient 0 (log_softmax: the incoming gradient).
    for (int64_t i = 0; i < 16; ++i) {
      for (int64_t j = i + 1; j < 16; ++j) {
        INFO((log ? "log_softmax" : "softmax") << " row " << i << " col " << j);
        CHECK(gp[i * 16 + j] == (log ? vp[i * 16 + j] : 0.0f));
      }
    }
  }
}

TEST_CASE("cuda norm weight and bias gradients are the same bits run to run", "[cuda][nn]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor x = random_values({700, 96}, ts::kFloat32, 170).to(kCuda);
  const ts::Tensor v = random_values({700, 96}, ts::kFloat32, 171).to(kCuda);
  Leaves first;
  for (int run = 0; run < 3; ++run) {
    const ts::Tensor w = ts::ones({96}).to(kCuda).requires_grad_();
    const ts::Tensor b = ts::zeros({96}).to(kCuda).requires_grad_();
    const Leaves g = ts::autograd::grad({ts::layer_norm(x, {96}, w, b)}, {w, b}, {v});
    if (first.empty()) {
      first = {g[0].cpu(), g[1].cpu()};
    } else {
      CHECK(ts::equal(g[0].cpu(), first[0]));
      CHECK(ts::equal(g[1].cpu(), first[1]));
    }
  }
}
