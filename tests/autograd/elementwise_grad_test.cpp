// Gradients of the elementwise ops (autograd/formulas/elementwise*.cpp): finite differences on
// contiguous, transposed, broadcast and zero-size float64 inputs, second derivatives, PyTorch's
// special cases (pow at 0, ties of maximum/minimum, clamp bounds), grad_fn names, dtypes of mixed
// precision gradients, and the ops that never record.

#include "tessera/runtime/ops/elementwise_grad.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/autograd/op_inputs.h"
#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using Inputs = std::vector<Tensor>;

// A non-contiguous float64 leaf of shape {rows, cols}: every other column of a wider tensor.
Tensor sliced_leaf(int64_t rows, int64_t cols, uint64_t seed, double low, double high) {
  Tensor t = random_leaf({rows, 2 * cols}, seed, low, high).detach().slice(1, 0, 2 * cols, 2);
  t.requires_grad_();
  return t;
}

std::string grad_fn_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "none"; }

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// With grad, fn records a node named grad_fn and computes what it computes without grad; on
// inputs that do not require grad it records nothing.
void check_recording(const std::function<Tensor(const Inputs&)>& fn, const Inputs& inputs,
                     const std::string& grad_fn) {
  const Tensor with_grad = fn(inputs);
  CHECK(grad_fn_name(with_grad) == grad_fn);
  CHECK(with_grad.requires_grad());
  Inputs detached;
  for (const Tensor& t : inputs) detached.push_back(t.detach());
  const Tensor plain = fn(detached);
  CHECK(plain.grad_fn() == nullptr);
  CHECK_FALSE(plain.requires_grad());
  CHECK(equal(with_grad.detach(), plain));
  NoGradGuard no_grad;
  CHECK(fn(inputs).grad_fn() == nullptr);
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  const char* grad_fn;
  bool positive_domain;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return -x; }, "NegBackward0", false},
      {"abs", [](const Tensor& x) { return abs(x); }, "AbsBackward0", false},
      {"exp", [](const Tensor& x) { return exp(x); }, "ExpBackward0", false},
      {"log", [](const Tensor& x) { return log(x); }, "LogBackward0", true},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, "SqrtBackward0", true},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, "RsqrtBackward0", true},
      {"relu", [](const Tensor& x) { return relu(x); }, "ReluBackward0", false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, "GeluBackward0", false},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, "GeluBackward0", false},
      {"silu", [](const Tensor& x) { return silu(x); }, "SiluBackward0", false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, "TanhBackward0", false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, "SigmoidBackward0", false},
      {"erf", [](const Tensor& x) { return erf(x); }, "ErfBackward0", false},
      {"erfc", [](const Tensor& x) { return erfc(x); }, "ErfcBackward0", false},
  };
}

TEST_CASE("unary ops: gradcheck on contiguous, transposed and zero-size inputs",
          "[elementwise_grad]") {
  for (const UnaryCase& c : unary_cases()) {
    INFO(c.name);
    const auto fn = [&](const Inputs& in) { return c.fn(in[0]); };
    const double low = c.positive_domain ? 0.5 : -2.0;
    const double high = 2.0;
    CHECK(gradcheck(fn, {random_leaf({3, 4}, 1, low, high)}));
    CHECK(gradcheck(fn, {transposed_leaf({3, 4}, 2, low, high)}));
    CHECK(gradcheck(fn, {sliced_leaf(3, 4, 5, low, high)}));
    CHECK(gradcheck(fn, {random_leaf({0, 3}, 3, low, high)}));
    check_recording(fn, {random_leaf({2, 3}, 4, low, high)}, c.grad_fn);
  }
}

TEST_CASE("unary ops at their kinks: relu and abs take PyTorch's values at 0",
          "[elementwise_grad]") {
  Tensor x = leaf({-1.0, 0.0, 2.0});
  relu(x).backward(ones_like(x));
  check_values(x.grad(), {0.0, 0.0, 1.0});
  x.set_grad(Tensor());
  abs(x).backward(ones_like(x));
  check_values(x.grad(), {-1.0, 0.0, 1.0});
  x.set_grad(Tensor());
  // GELU's derivative at 0 is Phi(0) = 1/2 for both approximations.
  gelu(x).backward(ones_like(x));
  CHECK(values(x.grad())[1] == Approx(0.5));
  x.set_grad(Tensor());
  gelu(x, "tanh").backward(ones_like(x));
  CHECK(values(x.grad())[1] == Approx(0.5));
}

TEST_CASE("second derivatives of exp, log, tanh, sigmoid, gelu, silu, erf and erfc",
          "[elementwise_grad]") {
  const Tensor x = random_leaf({2, 3}, 11, -2.0, 2.0);
  const Tensor p = positive_leaf({2, 3}, 12);
  CHECK(gradgradcheck([](const Inputs& in) { return exp(in[0]); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return log(in[0]); }, {p}));
  CHECK(gradgradcheck([](const Inputs& in) { return tanh(in[0]); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return sigmoid(in[0]); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return gelu(in[0]); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return gelu(in[0], "tanh"); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return silu(in[0]); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return erf(in[0]); }, {x}));
  CHECK(gradgradcheck([](const Inputs& in) { return erfc(in[0]); }, {x}));
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  const char* grad_fn;
  bool positive_first;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"a + b", [](const Tensor& a, const Tensor& b) { return a + b; }, "AddBackward0", false},
      {"add alpha", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }, "AddBackward0",
       false},
      {"a - b", [](const Tensor& a, const Tensor& b) { return a - b; }, "SubBackward0", false},
      {"sub alpha", [](const Tensor& a, const Tensor& b) { return sub(a, b, 3); }, "SubBackward0",
       false},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, "MulBackward0", false},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, "DivBackward0", true},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, "PowBackward1", true},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       "MaximumBackward0", false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       "MinimumBackward0", false},
  };
}

TEST_CASE("binary ops: gradcheck with broadcasting, transposed and zero-size inputs",
          "[elementwise_grad]") {
  for (const BinaryCase& c : binary_cases()) {
    INFO(c.name);
    const auto fn = [&](const Inputs& in) { return c.fn(in[0], in[1]); };
    // div and pow: the second operand is the divisor / exponent, the first the base.
    const auto first = [&](const Shape& s, uint64_t seed) {
      return c.positive_first ? positive_leaf(s, seed) : random_leaf(s, seed);
    };
    const auto second = [&](const Shape& s, uint64_t seed) {
      return c.positive_first ? random_leaf(s, seed, 0.5, 1.5) : random_leaf(s, seed);
    };
    CHECK(gradcheck(fn, {first({3, 4}, 1), second({3, 4}, 2)}));
    CHECK(gradcheck(fn, {first({3, 1}, 3), second({4}, 4)}));
    CHECK(gradcheck(fn, {first({2, 3, 4}, 5), second({}, 6)}));
    CHECK(gradcheck(fn, {second({4}, 7), first({2, 3, 1}, 8)}));
    CHECK(gradcheck(fn, {transposed_leaf({3, 4}, 9, 0.5, 1.5), second({3, 4}, 10)}));
    CHECK(gradcheck(fn, {second({3, 4}, 19), sliced_leaf(3, 4, 20, 0.5, 1.5)}));
    CHECK(gradcheck(fn, {first({0, 4}, 11), second({4}, 12)}));
    // Only one operand requires grad.
    CHECK(gradcheck(fn, {first({3, 4}, 13), second({3, 4}, 14).detach()}));
    CHECK(gradcheck(fn, {first({3, 4}, 15).detach(), second({4}, 16)}));
    check_recording(fn, {first({2, 3}, 17), second({3}, 18)}, c.grad_fn);
  }
}

TEST_CASE("second derivatives of add, mul, div and pow", "[elementwise_grad]") {
  const Tensor a = random_leaf({2, 3}, 21);
  const Tensor b = random_leaf({2, 3}, 22);
  const Tensor p = positive_leaf({2, 3}, 23);
  CHECK(gradgradcheck([](const Inputs& in) { return add(in[0], in[1], 2.0); }, {a, b}));
  CHECK(gradgradcheck([](const Inputs& in) { return in[0] * in[1]; }, {a, b}));
  CHECK(gradgradcheck([](const Inputs& in) { return in[0] / in[1]; }, {a, p}));
  CHECK(gradgradcheck([](const Inputs& in) { return pow(in[0], in[1]); }, {p, b}));
  CHECK(gradgradcheck([](const Inputs& in) { return pow(in[0], 3); }, {a}));
  CHECK(gradgradcheck([](const Inputs& in) { return pow(in[0], 2.5); }, {p}));
  CHECK(gradgradcheck(
      [](const Inputs& in) { return detail::binary_scalar(BinaryOp::kPow, in[0], 1.7, true); },
      {a}));
  CHECK(gradgradcheck([](const Inputs& in) { return 2.0 / in[0]; }, {p}));
}

TEST_CASE("second derivatives through broadcasting", "[elementwise_grad]") {
  // sum_to records too: the reduced gradient of a broadcast operand differentiates again.
  const Tensor a = random_leaf({2, 3}, 24);
  const Tensor b = random_leaf({3}, 25);
  const Tensor c = random_leaf({2, 1}, 26);
  CHECK(gradgradcheck([](const Inputs& in) { return in[0] * in[1]; }, {a, b}));
  CHECK(gradgradcheck([](const Inputs& in) { return sub(in[0], in[1], 0.5); }, {b, c}));
  CHECK(gradgradcheck([](const Inputs& in) { return in[0] / in[1]; }, {a, positive_leaf({3}, 27)}));
}

TEST_CASE("tensor-scalar and scalar-tensor ops", "[elementwise_grad]") {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> fn;
    const char* grad_fn;
  };
  const std::vector<Case> cases = {
      {"x + 2", [](const Tensor& x) { return x + 2; }, "AddBackward1"},
      {"2 + x", [](const Tensor& x) { return 2 + x; }, "AddBackward0"},
      {"x - 1.5", [](const Tensor& x) { return x - 1.5; }, "SubBackward1"},
      {"1.5 - x", [](const Tensor& x) { return 1.5 - x; }, "SubBackward0"},
      {"x * 3", [](const Tensor& x) { return x * 3; }, "MulBackward1"},
      {"-0.5 * x", [](const Tensor& x) { return -0.5 * x; }, "MulBackward0"},
      {"x / 4", [](const Tensor& x) { return x / 4; }, "DivBackward1"},
      {"2 / x", [](const Tensor& x) { return 2 / x; }, "DivBackward0"},
      {"pow(x, 3)", [](const Tensor& x) { return pow(x, 3); }, "PowBackward0"},
      {"pow(x, 2.5)", [](const Tensor& x) { return pow(x, 2.5); }, "PowBackward0"},
      {"pow(x, -1)", [](const Tensor& x) { return pow(x, -1.0); }, "PowBackward0"},
      {"pow(2.5, x)",
       [](const Tensor& x) { return detail::binary_scalar(BinaryOp::kPow, x, 2.5, true); },
       "PowBackward2"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const auto fn = [&](const Inputs& in) { return c.fn(in[0]); };
    CHECK(gradcheck(fn, {positive_leaf({3, 4}, 31)}));
    CHECK(gradcheck(fn, {transposed_leaf({3, 4}, 32, 0.5, 2.0)}));
    CHECK(gradcheck(fn, {positive_leaf({0}, 33)}));
    check_recording(fn, {positive_leaf({2, 2}, 34)}, c.grad_fn);
  }
}

TEST_CASE("pow at 0: PyTorch's gradients of 0^0, x^0 and 0^b", "[elementwise_grad]") {
  // d/da a^b = 0 where b == 0; d/db a^b = 0 where a == 0 and b >= 0 (not 0 * log 0 = NaN).
  Tensor a = leaf({0.0, 0.0, 0.0, 2.0});
  Tensor b = leaf({0.0, 2.0, 3.0, 0.0});
  pow(a, b).backward(ones_like(a));
  check_values(a.grad(), {0.0, 0.0, 0.0, 0.0});
  check_values(b.grad(), {0.0, 0.0, 0.0, std::log(2.0)});

  Tensor x = leaf({0.0, 1.5});
  pow(x, 0).backward(ones_like(x));
  check_values(x.grad(), {0.0, 0.0});

  // 0^x: no gradient for x >= 0, -inf where 0^x is infinite.
  Tensor e = leaf({0.0, 1.0, -1.0});
  detail::binary_scalar(BinaryOp::kPow, e, 0.0, true).backward(ones_like(e));
  const std::vector<double> ge = values(e.grad());
  CHECK(ge[0] == 0.0);
  CHECK(ge[1] == 0.0);
  CHECK(ge[2] == -std::numeric_limits<double>::infinity());
}

TEST_CASE("maximum and minimum split the gradient of ties in half", "[elementwise_grad]") {
  Tensor a = leaf({1.0, 2.0, 3.0});
  Tensor b = leaf({2.0, 2.0, 1.0});
  maximum(a, b).backward(ones_like(a));
  check_values(a.grad(), {0.0, 0.5, 1.0});
  check_values(b.grad(), {1.0, 0.5, 0.0});
  a.set_grad(Tensor());
  b.set_grad(Tensor());
  minimum(a, b).backward(ones_like(a));
  check_values(a.grad(), {1.0, 0.5, 0.0});
  check_values(b.grad(), {0.0, 0.5, 1.0});
}

TEST_CASE("where: gradients of both branches, none for the condition", "[elementwise_grad]") {
  const Tensor cond = random_leaf({3, 4}, 41).detach() > 0;
  const auto fn = [&](const Inputs& in) { return where(cond, in[0], in[1]); };
  CHECK(gradcheck(fn, {random_leaf({3, 4}, 42), random_leaf({3, 4}, 43)}));
  CHECK(gradcheck(fn, {random_leaf({4}, 44), random_leaf({3, 1}, 45)}));
  CHECK(gradcheck(fn, {transposed_leaf({3, 4}, 46), random_leaf({}, 47)}));
  const Tensor empty_cond = zeros({0, 2}, kBool);
  CHECK(gradcheck([&](const Inputs& in) { return where(empty_cond, in[0], in[1]); },
                  {random_leaf({0, 2}, 48), random_leaf({2}, 49)}));
  check_recording(fn, {random_leaf({3, 4}, 50), random_leaf({4}, 51)}, "WhereBackward0");
  CHECK(gradgradcheck(fn, {random_leaf({3, 4}, 52), random_leaf({3, 4}, 53)}));

  Tensor a = leaf({1.0, 2.0});
  Tensor b = leaf({3.0, 4.0});
  where(vec({1.0, 0.0}, Shape{2}) > 0, a, b).backward(ones_like(a));
  check_values(a.grad(), {1.0, 0.0});
  check_values(b.grad(), {0.0, 1.0});
}

TEST_CASE("clamp: the gradient passes where min <= x <= max", "[elementwise_grad]") {
  const auto both = [](const Inputs& in) { return clamp(in[0], -0.5, 0.5); };
  const auto min_only = [](const Inputs& in) { return clamp(in[0], -0.5); };
  const auto max_only = [](const Inputs& in) { return clamp(in[0], std::nullopt, 0.25); };
  const std::vector<std::function<Tensor(const Inputs&)>> fns = {both, min_only, max_only};
  for (const auto& fn : fns) {
    CHECK(gradcheck(fn, {random_leaf({3, 4}, 61)}));
    CHECK(gradcheck(fn, {transposed_leaf({3, 4}, 62)}));
    CHECK(gradcheck(fn, {random_leaf({0, 4}, 63)}));
    check_recording(fn, {random_leaf({3, 4}, 64)}, "ClampBackward1");
  }
  // At the bounds the gradient passes (clamp_backward uses >= and <=).
  Tensor x = leaf({-1.0, -0.5, 0.0, 0.5, 1.0});
  clamp(x, -0.5, 0.5).backward(ones_like(x));
  check_values(x.grad(), {0.0, 1.0, 1.0, 1.0, 0.0});
}

TEST_CASE("mixed float32 / float64 inputs get gradients in their own dtype", "[elementwise_grad]") {
  Tensor a = leaf({1.0, 2.0, 3.0}).detach().to(kFloat32).requires_grad_();
  Tensor b = leaf({0.5, -1.0, 2.0});
  Tensor out = a * b;
  REQUIRE(out.dtype() == kFloat64);
  out.backward(ones_like(out));
  CHECK(a.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat64);
  check_values(a.grad(), {0.5, -1.0, 2.0});
  check_values(b.grad(), {1.0, 2.0, 3.0});

  a.set_grad(Tensor());
  Tensor c = leaf({1.0, 2.0}, Shape{2, 1});
  add(a, c, 2).backward(ones({2, 3}, kFloat64));
  CHECK(a.grad().dtype() == kFloat32);
  check_values(a.grad(), {2.0, 2.0, 2.0});
  check_values(c.grad(), {6.0, 6.0});
}

TEST_CASE("integer operands get no gradient and promote the formulas", "[elementwise_grad]") {
  const Tensor i = from_vector(std::vector<int64_t>{2, -3}, Shape{2});
  Tensor x = leaf({0.5, 1.5});
  Tensor out = i * x + pow(x, i);
  CHECK(out.dtype() == kFloat64);
  out.backward(ones_like(out));
  check_values(x.grad(), {2.0 + 2 * 0.5, -3.0 + -3.0 * std::pow(1.5, -4)});
  CHECK_FALSE(i.requires_grad());
}

TEST_CASE("float32 and bfloat16 gradients follow the float64 ones", "[elementwise_grad]") {
  const Tensor x64 = random_leaf({16}, 91, -2.0, 2.0).detach();
  const auto grad_of = [](const Tensor& x, const std::function<Tensor(const Tensor&)>& fn) {
    Tensor leaf_x = x.clone();
    leaf_x.requires_grad_();
    Tensor out = fn(leaf_x);
    out.backward(ones_like(out));
    REQUIRE(leaf_x.grad().dtype() == x.dtype());
    return leaf_x.grad().to(kFloat64);
  };
  for (const UnaryCase& c : unary_cases()) {
    if (c.positive_domain) continue;
    INFO(c.name);
    const Tensor expected = grad_of(x64, c.fn);
    CHECK(allclose(grad_of(x64.to(kFloat32), c.fn), expected, 1e-5, 1e-5));
    CHECK(allclose(grad_of(x64.to(kBFloat16), c.fn), expected, 5e-2, 5e-2));
  }
}

TEST_CASE("comparisons and logical ops return kBool and never record", "[elementwise_grad]") {
  const Tensor a = random_leaf({2, 3}, 71);
  const Tensor b = random_leaf({2, 3}, 72);
  for (const Tensor& t :
       {a<b, a <= b, a> b, a >= b, a == b, a != b, a > 0.0, a == 1, logical_and(a > 0, b > 0),
        logical_or(a > 0, b > 0), logical_not(a > 0), logical_and(a, b), logical_not(a)}) {
    CHECK(t.dtype() == kBool);
    CHECK_FALSE(t.requires_grad());
    CHECK(t.grad_fn() == nullptr);
  }
}

TEST_CASE("errors of ops with grad name the op", "[elementwise_grad]") {
  const Tensor a = random_leaf({2, 3}, 81);
  const Tensor b = random_leaf({4}, 82);
  CHECK_THROWS_WITH(a + b, Catch::Contains("[add]"));
  CHECK_THROWS_WITH(add(a, b, 2.0), Catch::Contains("[add]"));
  CHECK_THROWS_WITH(a * b, Catch::Contains("[mul]"));
  CHECK_THROWS_WITH(gelu(a, "fast"), Catch::Contains("[gelu]"));
  CHECK_THROWS_WITH(clamp(a, std::nullopt, std::nullopt), Catch::Contains("[clamp]"));
  CHECK_THROWS_WITH(where(a, a, a), Catch::Contains("[where]"));
  CHECK_THROWS_WITH(sub(a, a > 0), Catch::Contains("[sub]"));
}

}  // namespace
}  // namespace tessera::autograd_test
