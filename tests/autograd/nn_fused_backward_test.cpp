// The one-pass backward kernels of softmax, log_softmax, layer_norm, rms_norm and cross_entropy
// (Note [Fused nn backward]): without create_graph the formulas take them, with it they compose
// ops that record. Both paths agree on every floating dtype, on strided and masked inputs; the
// float32 kernels follow a float64 computation; the norms' weight and bias sums do not depend on
// the thread count. gradcheck and gradgradcheck of these ops run in nn_grad_test.cpp and
// nn_grad_loss_test.cpp (float64 finite differences reach the kernels through gradcheck).

#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops/nn_internal.h"
#include "tessera/runtime/parallel.h"
#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using Inputs = std::vector<Tensor>;

struct Case {
  std::string name;
  // The differentiable leaves (float64, to be cast), and the function of them.
  std::function<Inputs()> leaves;
  std::function<Tensor(const Inputs&)> fn;
};

Tensor masked_scores(const Shape& shape, uint64_t seed) {
  // Additive causal mask: -inf above the diagonal of the last two dims, as attention scores.
  const int64_t n = shape[shape.size() - 1];
  std::vector<double> m(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) {
      m[static_cast<size_t>(i * n + j)] = -std::numeric_limits<double>::infinity();
    }
  }
  return random_leaf(shape, seed, -3, 3).detach() + from_vector(m, {n, n});
}

std::vector<Case> cases() {
  std::vector<Case> c;
  for (const bool log : {false, true}) {
    const auto op = log ? &log_softmax : &softmax;
    const std::string name = log ? "log_softmax" : "softmax";
    c.push_back({name + " last dim",
                 [] {
                   return Inputs{random_leaf({6, 33}, 1, -3, 3)};
                 },
                 [op](const Inputs& x) { return op(x[0], -1); }});
    c.push_back({name + " dim 0",
                 [] {
                   return Inputs{random_leaf({7, 5}, 2, -3, 3)};
                 },
                 [op](const Inputs& x) { return op(x[0], 0); }});
    c.push_back({name + " transposed",
                 [] {
                   return Inputs{transposed_leaf({5, 9}, 3)};
                 },
                 [op](const Inputs& x) { return op(x[0], -1); }});
    c.push_back({name + " masked",
                 [] {
                   return Inputs{masked_scores({2, 3, 8, 8}, 4)};
                 },
                 [op](const Inputs& x) { return op(x[0], -1); }});
    // Rows of 37: whole vectors of every ISA's width (4, 8, 16 floats) and a partial one.
    c.push_back({name + " masked, rows of 37",
                 [] {
                   return Inputs{masked_scores({2, 37, 37}, 6)};
                 },
                 [op](const Inputs& x) { return op(x[0], -1); }});
    c.push_back({name + " 0-dim", [] { return Inputs{random_leaf({}, 5)}; },
                 [op](const Inputs& x) { return op(x[0], 0); }});
  }
  c.push_back({"layer_norm affine",
               [] {
                 return Inputs{random_leaf({4, 6, 40}, 11, -2, 3), random_leaf({40}, 12),
                               random_leaf({40}, 13)};
               },
               [](const Inputs& x) { return layer_norm(x[0], {40}, x[1], x[2]); }});
  c.push_back({"layer_norm over two dims, no affine",
               [] {
                 return Inputs{random_leaf({5, 3, 7}, 14, -2, 3)};
               },
               [](const Inputs& x) {
                 return layer_norm(x[0], {3, 7});
               }});
  c.push_back({"layer_norm transposed input, weight only",
               [] {
                 return Inputs{transposed_leaf({6, 8}, 15), random_leaf({8}, 16)};
               },
               [](const Inputs& x) { return layer_norm(x[0], {8}, x[1]); }});
  c.push_back({"rms_norm with weight",
               [] {
                 return Inputs{random_leaf({9, 24}, 17, -2, 3), random_leaf({24}, 18)};
               },
               [](const Inputs& x) { return rms_norm(x[0], {24}, x[1]); }});
  c.push_back({"rms_norm without weight",
               [] {
                 return Inputs{random_leaf({3, 2, 5}, 19)};
               },
               [](const Inputs& x) {
                 return rms_norm(x[0], {2, 5});
               }});
  const Tensor target = from_vector<int64_t>({2, 0, -100, 4, 1, 4}, {6});
  for (const Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (const double ls : {0.0, 0.2}) {
      const CrossEntropyOptions o{.ignore_index = -100, .label_smoothing = ls, .reduction = r};
      c.push_back(
          {"cross_entropy reduction " + std::to_string(int(r)) + " smoothing " + std::to_string(ls),
           [] {
             return Inputs{random_leaf({6, 5}, 20, -3, 3)};
           },
           [target, o](const Inputs& x) { return cross_entropy(x[0], target, o); }});
    }
  }
  const Tensor target3 = from_vector<int64_t>({1, 0, 2, 2, 0, 1}, {2, 3});
  c.push_back({"cross_entropy [N, C, d]",
               [] {
                 return Inputs{random_leaf({2, 3, 3}, 21)};
               },
               [target3](const Inputs& x) { return cross_entropy(x[0], target3); }});
  const Tensor target1 = from_vector<int64_t>({3}, {});
  c.push_back({"cross_entropy [C]", [] { return Inputs{random_leaf({7}, 22)}; },
               [target1](const Inputs& x) {
                 return cross_entropy(x[0], target1, {.reduction = Reduction::None});
               }});
  return c;
}

Inputs cast_leaves(const Inputs& in, DType dtype) {
  Inputs out;
  for (const Tensor& t : in) out.push_back(t.detach().to(dtype).requires_grad_());
  return out;
}

// Gradients of fn at the leaves for a fixed random output gradient: fused (no create_graph) or
// composed (create_graph makes the formulas record).
Inputs gradients(const Case& c, const Inputs& leaves, bool create_graph) {
  const Tensor out = c.fn(leaves);
  const Tensor v = random_leaf(out.sizes(), 9, -1, 1).detach().to(out.dtype());
  Inputs g = autograd::grad({out}, leaves, {v}, {.create_graph = create_graph});
  for (Tensor& t : g) t = t.detach().to(kFloat64);
  return g;
}

}  // namespace

TEST_CASE("the CPU has the one-pass nn backward kernels", "[nn_grad][fused]") {
  CHECK(detail::has_fused_nn_backward(zeros({1})));
}

TEST_CASE("one-pass and composed nn backward agree on every floating dtype", "[nn_grad][fused]") {
  for (const Case& c : cases()) {
    const Inputs base = c.leaves();
    // The float64 composed gradients are the reference.
    const Inputs reference = gradients(c, cast_leaves(base, kFloat64), true);
    for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
      INFO(c.name << " " << dtype);
      const double tol = dtype == kFloat64 ? 1e-12 : (dtype == kFloat32 ? 2e-5 : 3e-2);
      const Inputs leaves = cast_leaves(base, dtype);
      const Inputs fused = gradients(c, leaves, false);
      // Reduced dtypes: the input rounded to the dtype is part of the error either way, so the
      // comparison is with the composed path on the same (rounded) input.
      const Inputs composed = gradients(c, leaves, true);
      for (size_t i = 0; i < leaves.size(); ++i) {
        CHECK(allclose(fused[i], composed[i], tol, tol));
        if (dtype == kFloat64 || dtype == kFloat32) {
          CHECK(allclose(fused[i], reference[i], tol, tol));
        }
      }
    }
  }
}

TEST_CASE("one-pass nn backward results have the composed dtypes and shapes", "[nn_grad][fused]") {
  Tensor x = random_leaf({4, 8}, 31).detach().to(kBFloat16).requires_grad_();
  Tensor w = random_leaf({8}, 32).detach().to(kFloat32).requires_grad_();
  Tensor b = random_leaf({8}, 33).detach().to(kFloat32).requires_grad_();
  const Inputs g = autograd::grad({layer_norm(x, {8}, w, b).sum()}, {x, w, b});
  CHECK(g[0].dtype() == kBFloat16);
  CHECK(g[1].dtype() == kFloat32);
  CHECK(g[2].dtype() == kFloat32);
  CHECK(g[1].sizes() == Shape{8});
  // Only the wanted gradients: x alone.
  Tensor x2 = random_leaf({4, 8}, 34).requires_grad_();
  const Tensor w2 = random_leaf({8}, 35).detach();
  const Inputs gx = autograd::grad({layer_norm(x2, {8}, w2).sum()}, {x2});
  CHECK(gx[0].sizes() == x2.sizes());
}

TEST_CASE("masked softmax rows get exactly zero gradient where masked", "[nn_grad][fused]") {
  Tensor s = masked_scores({1, 1, 16, 16}, 41).to(kFloat32).requires_grad_();
  for (const bool log : {false, true}) {
    const Tensor y = log ? log_softmax(s, -1) : softmax(s, -1);
    const Tensor v = random_leaf(y.sizes(), 42).detach().to(kFloat32);
    const Tensor g = autograd::grad({y}, {s}, {v})[0].contiguous();
    const float* gp = g.data_ptr<float>();
    const float* vp = v.data_ptr<float>();
    // Above the diagonal the probability is 0, so is its gradient (log: the incoming gradient).
    for (int64_t i = 0; i < 16; ++i) {
      for (int64_t j = i + 1; j < 16; ++j) {
        const float want = log ? vp[i * 16 + j] : 0.0f;
        CHECK(gp[i * 16 + j] == want);
      }
    }
  }
}

TEST_CASE("norm weight and bias gradients do not depend on the thread count", "[nn_grad][fused]") {
  // Enough rows for several blocks (Note in kernels/cpu/norm.cpp: blocks by shape).
  const Tensor x = random_leaf({700, 96}, 51).detach().to(kFloat32);
  const Tensor v = random_leaf({700, 96}, 52).detach().to(kFloat32);
  Inputs first;
  for (int threads : {1, 2, 3}) {
    Inputs g;
    {
      const IntraOpThreadsGuard scope(threads);
      Tensor w = ones({96}, kFloat32).requires_grad_();
      Tensor b = zeros({96}, kFloat32).requires_grad_();
      g = autograd::grad({layer_norm(x, {96}, w, b)}, {w, b}, {v});
    }
    if (first.empty()) {
      first = g;
    } else {
      CHECK(allclose(g[0], first[0], 0.0, 0.0));
      CHECK(allclose(g[1], first[1], 0.0, 0.0));
    }
  }
}

TEST_CASE("one-pass nn backward of empty inputs", "[nn_grad][fused]") {
  Tensor x = zeros({0, 5}).requires_grad_();
  Tensor w = ones({5}).requires_grad_();
  Tensor b = zeros({5}).requires_grad_();
  const Inputs g = autograd::grad({layer_norm(x, {5}, w, b).sum()}, {x, w, b});
  CHECK(g[0].sizes() == Shape{0, 5});
  CHECK(allclose(g[1], zeros({5}), 0.0, 0.0));
  CHECK(allclose(g[2], zeros({5}), 0.0, 0.0));
  Tensor s = zeros({0, 4}).requires_grad_();
  CHECK(autograd::grad({softmax(s, -1).sum()}, {s})[0].sizes() == Shape{0, 4});
}

// Note [Reusing the incoming gradient]: a gradient handed over as the only reference takes the
// result in place; one that another tensor still shares is left as it was.
TEST_CASE("softmax backward writes over a gradient it holds the only reference to",
          "[nn_grad][fused]") {
  for (const bool log : {false, true}) {
    INFO((log ? "log_softmax" : "softmax"));
    const Tensor x = masked_scores({2, 3, 40, 40}, 51).to(kFloat32);
    const Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
    const Tensor g0 = random_leaf(y.sizes(), 52).detach().to(kFloat32);
    const Tensor want = detail::softmax_backward(g0, y, -1, log);

    Tensor only = g0.clone();
    const void* buffer = only.raw_data();
    const Tensor in_place = detail::softmax_backward(std::move(only), y, -1, log);
    CHECK(in_place.raw_data() == buffer);
    CHECK(allclose(in_place, want, 0, 0));

    Tensor shared = g0.clone();
    const Tensor keeper = shared;  // a second reference: not reusable
    const Tensor fresh = detail::softmax_backward(std::move(shared), y, -1, log);
    CHECK(fresh.raw_data() != keeper.raw_data());
    CHECK(allclose(fresh, want, 0, 0));
    CHECK(allclose(keeper, g0, 0, 0));
  }
}

}  // namespace tessera::autograd_test
