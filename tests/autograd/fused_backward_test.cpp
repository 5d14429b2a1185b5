// The backward formulas of pointwise ops take one fused kernel per gradient unless the gradient
// must record (Note [Fused pointwise backward]): both paths give the same gradients on every
// floating dtype and on broadcast inputs, the fused one matches finite differences (gradcheck),
// and create_graph still gives second derivatives. The kernels themselves are checked against
// float64 references in tests/runtime/pointwise_backward_test.cpp.

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "tessera/runtime/ops/elementwise_grad.h"
#include "tests/autograd/op_inputs.h"
#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using Inputs = std::vector<Tensor>;

struct Case {
  const char* name;
  std::function<Tensor(const Inputs&)> fn;
  // Ranges of the inputs; a second input only when hi1 > lo1.
  double lo0, hi0, lo1 = 0, hi1 = 0;
};

std::vector<Case> cases() {
  return {
      {"abs", [](const Inputs& x) { return abs(x[0]); }, -2, 2},
      {"exp", [](const Inputs& x) { return exp(x[0]); }, -2, 2},
      {"log", [](const Inputs& x) { return log(x[0]); }, 0.5, 2},
      {"sqrt", [](const Inputs& x) { return sqrt(x[0]); }, 0.5, 2},
      {"rsqrt", [](const Inputs& x) { return rsqrt(x[0]); }, 0.5, 2},
      {"relu", [](const Inputs& x) { return relu(x[0]); }, -2, 2},
      {"gelu", [](const Inputs& x) { return gelu(x[0]); }, -4, 4},
      {"gelu tanh", [](const Inputs& x) { return gelu(x[0], "tanh"); }, -4, 4},
      {"silu", [](const Inputs& x) { return silu(x[0]); }, -4, 4},
      {"tanh", [](const Inputs& x) { return tanh(x[0]); }, -2, 2},
      {"sigmoid", [](const Inputs& x) { return sigmoid(x[0]); }, -4, 4},
      {"erf", [](const Inputs& x) { return erf(x[0]); }, -2, 2},
      {"erfc", [](const Inputs& x) { return erfc(x[0]); }, -2, 2},
      {"clamp", [](const Inputs& x) { return clamp(x[0], -0.5, 0.75); }, -2, 2},
      {"clamp min", [](const Inputs& x) { return clamp(x[0], -0.5); }, -2, 2},
      {"clamp max", [](const Inputs& x) { return clamp(x[0], std::nullopt, 0.75); }, -2, 2},
      {"pow scalar", [](const Inputs& x) { return pow(x[0], 2.5); }, 0.5, 2},
      {"pow int scalar", [](const Inputs& x) { return pow(x[0], 3); }, -2, 2},
      {"scalar / x", [](const Inputs& x) { return 1.5 / x[0]; }, 0.5, 2},
      {"scalar pow",
       [](const Inputs& x) { return detail::binary_scalar(BinaryOp::kPow, x[0], 2.5, true); }, -2,
       2},
      {"div", [](const Inputs& x) { return x[0] / x[1]; }, -2, 2, 0.5, 2},
      {"pow", [](const Inputs& x) { return pow(x[0], x[1]); }, 0.5, 2, -2, 2},
  };
}

bool two(const Case& c) { return c.hi1 > c.lo1; }

// Leaves of dtype for case c: the first of shape a, the second (if any) of shape b.
Inputs leaves(const Case& c, DType dtype, const Shape& a, const Shape& b, uint64_t seed) {
  Inputs in{random_leaf(a, seed, c.lo0, c.hi0).detach().to(dtype).requires_grad_()};
  if (two(c))
    in.push_back(random_leaf(b, seed + 1, c.lo1, c.hi1).detach().to(dtype).requires_grad_());
  return in;
}

// The gradients of fn(inputs) for a random output gradient (or, when `expanded`, for sum(fn),
// whose gradient reaches fn as one value broadcast), without and with create_graph.
std::pair<Inputs, Inputs> both_paths(const Case& c, const Inputs& in, bool expanded) {
  const Tensor out = c.fn(in);
  const Tensor v = expanded ? ones({}, out.dtype()).expand(out.sizes())
                            : random_leaf(out.sizes(), 9, -1, 1).detach().to(out.dtype());
  const Inputs fused = autograd::grad({out}, in, {v}, {.retain_graph = true});
  const Inputs composite = autograd::grad({out}, in, {v}, {.create_graph = true});
  return {fused, composite};
}

}  // namespace

TEST_CASE("fused and composite backward formulas agree on every floating dtype",
          "[elementwise_grad][fused]") {
  for (const Case& c : cases()) {
    for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
      INFO(c.name << " " << dtype);
      const double tol = dtype == kFloat64 ? 1e-12 : (dtype == kFloat32 ? 1e-5 : 2e-2);
      // Same shapes, then the second input and the output gradient broadcast.
      for (const bool broadcast : {false, true}) {
        const Inputs in = leaves(c, dtype, {3, 5}, broadcast ? Shape{5} : Shape{3, 5}, 7);
        const auto [fused, composite] = both_paths(c, in, broadcast);
        for (size_t i = 0; i < in.size(); ++i) {
          REQUIRE(fused[i].dtype() == dtype);
          CHECK_FALSE(fused[i].requires_grad());
          CHECK(allclose(fused[i].to(kFloat64), composite[i].detach().to(kFloat64), tol, tol));
        }
      }
    }
  }
}

TEST_CASE("fused backward formulas pass gradcheck, and second derivatives still record",
          "[elementwise_grad][fused]") {
  for (const Case& c : cases()) {
    INFO(c.name);
    CHECK(gradcheck(c.fn, leaves(c, kFloat64, {3, 4}, {3, 4}, 11)));
    CHECK(gradcheck(c.fn, leaves(c, kFloat64, {2, 3, 4}, {4}, 12)));
    Inputs transposed{transposed_leaf({3, 4}, 13, c.lo0, c.hi0)};
    if (two(c)) transposed.push_back(transposed_leaf({3, 4}, 14, c.lo1, c.hi1));
    CHECK(gradcheck(c.fn, transposed));
    CHECK(gradgradcheck(c.fn, leaves(c, kFloat64, {2, 3}, {3}, 15)));
  }
}

TEST_CASE("the gelu of the MLP: fused backward on float32 follows float64",
          "[elementwise_grad][fused]") {
  // The shape and dtype of issue 19's MLP hidden layer, scaled down.
  const Tensor x64 = random_leaf({64, 256}, 21, -4, 4).detach();
  for (const char* approximate : {"none", "tanh"}) {
    INFO(approximate);
    Tensor x32 = x64.to(kFloat32).requires_grad_();
    Tensor x = x64.clone().requires_grad_();
    gelu(x32, approximate).sum().backward();
    gelu(x, approximate).sum().backward();
    CHECK(allclose(x32.grad().to(kFloat64), x.grad(), 1e-5, 1e-6));
  }
}

TEST_CASE("a fused backward writes over the incoming gradient only when nothing else holds it",
          "[elementwise_grad][fused]") {
  // exp's gradient reaches gelu's node as a fresh contiguous tensor: written over (Note [Reusing
  // the incoming gradient]); the result must still be gelu'(x) * exp(gelu(x)).
  const Tensor x = random_leaf({4, 6}, 31, -3, 3);
  const Tensor expected = [&] {
    const Tensor xd = x.detach().clone().requires_grad_();
    const Tensor phi = exp(xd * xd * -0.5) * (1.0 / std::sqrt(2 * M_PI));
    const Tensor derivative = (erf(xd * M_SQRT1_2) + 1.0) * 0.5 + xd * phi;
    return (derivative * exp(gelu(xd))).detach();
  }();
  CHECK(allclose(autograd::grad({exp(gelu(x)).sum()}, {x})[0], expected, 1e-12, 1e-12));

  // The same gradient captured by autograd::grad on the way: it keeps its value.
  const Tensor e = gelu(x);
  const std::vector<Tensor> both = autograd::grad({exp(e).sum()}, {e, x});
  CHECK(allclose(both[0], exp(e).detach(), 1e-12, 1e-12));
  CHECK(allclose(both[1], expected, 1e-12, 1e-12));

  // A hook that keeps the gradient it sees: it keeps its value too.
  Tensor seen;
  const Tensor e2 = gelu(x);
  e2.register_hook([&](const Tensor& g) {
    seen = g;
    return g;
  });
  CHECK(allclose(autograd::grad({exp(e2).sum()}, {x})[0], expected, 1e-12, 1e-12));
  CHECK(allclose(seen, exp(e2).detach(), 1e-12, 1e-12));
}

TEST_CASE(
    "a tensor-scalar mul or div backward writes over its gradient only when nothing else holds it",
    "[elementwise_grad][fused]") {
  // exp's gradient reaches the scalar op's node as a fresh tensor: scaled in place; the result
  // must still be exp(x * s) * s (or / s).
  const Tensor x = random_leaf({5, 7}, 41, -2, 2);
  for (const bool divide : {false, true}) {
    INFO((divide ? "div" : "mul"));
    for (DType dtype : {kFloat64, kFloat32, kBFloat16}) {
      INFO(dtype);
      const Tensor xd = x.detach().to(dtype).requires_grad_();
      const auto scaled = [&](const Tensor& t) { return divide ? t / 4.0 : t * 4.0; };
      const Tensor expected = scaled(exp(scaled(xd.detach())));
      CHECK(allclose(autograd::grad({exp(scaled(xd)).sum()}, {xd})[0], expected, 0, 0));

      // The same gradient captured on the way keeps its value.
      const Tensor e = scaled(xd);
      const std::vector<Tensor> both = autograd::grad({exp(e).sum()}, {e, xd});
      CHECK(allclose(both[0], exp(e).detach(), 0, 0));
      CHECK(allclose(both[1], expected, 0, 0));
    }
  }
}

}  // namespace tessera::autograd_test
