// Gradients of the reductions: gradcheck over dims / keepdim / layouts / zero-size inputs,
// gradgradcheck of sum, mean and var, PyTorch's choices at ties and zeros, grad_fn names, and
// that nothing records when nothing requires grad.

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using UnaryFn = std::function<Tensor(const Tensor&)>;

Tensor values(const std::vector<double>& v, const Shape& shape) {
  Tensor t = from_vector(v, shape);
  t.requires_grad_();
  return t;
}

Tensor grad_of(const UnaryFn& fn, const Tensor& x) { return autograd::grad({sum(fn(x))}, {x})[0]; }

void check_grad_values(const Tensor& grad, const std::vector<double>& expected) {
  const std::vector<double> got = grad.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(1e-12));
  }
}

// fn at x records a node named grad_fn, computes what it computes without grad, and passes
// gradcheck; at a detached x it records nothing.
void check_reduction(const UnaryFn& fn, const Tensor& x, const std::string& grad_fn) {
  const Tensor out = fn(x);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(out.grad_fn()->name() == grad_fn);
  const Tensor plain = fn(x.detach());
  CHECK(plain.grad_fn() == nullptr);
  CHECK_FALSE(plain.requires_grad());
  CHECK(out.sizes() == plain.sizes());
  CHECK(allclose(out.detach(), plain, 0.0, 0.0, /*equal_nan=*/true));
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return fn(in[0]); }, {x}));
}

void check_second_order(const UnaryFn& fn, const Tensor& x) {
  CHECK(gradgradcheck([&](const std::vector<Tensor>& in) { return fn(in[0]); }, {x}));
}

TEST_CASE("sum: gradients over dims, keepdim, layouts and zero-size inputs", "[reduction_grad]") {
  const Tensor x = random_leaf({2, 3, 4}, 1);
  check_reduction([](const Tensor& t) { return sum(t); }, x, "SumBackward0");
  for (bool keepdim : {false, true}) {
    check_reduction([&](const Tensor& t) { return sum(t, {1}, keepdim); }, x, "SumBackward1");
    check_reduction([&](const Tensor& t) { return sum(t, {-1, 0}, keepdim); }, x, "SumBackward1");
    // keepdim can only come from the overload with dims.
    check_reduction([&](const Tensor& t) { return sum(t, {}, keepdim); }, x,
                    keepdim ? "SumBackward1" : "SumBackward0");
  }
  check_reduction([](const Tensor& t) { return sum(t, {0}); }, transposed_leaf({3, 4}, 2),
                  "SumBackward1");
  check_reduction([](const Tensor& t) { return sum(t); }, random_leaf({0, 3}, 3), "SumBackward0");
  check_reduction([](const Tensor& t) { return sum(t, {0}, true); }, random_leaf({0, 3}, 3),
                  "SumBackward1");
  check_reduction([](const Tensor& t) { return sum(t); }, random_leaf({}, 4), "SumBackward0");
  // A requested dtype: the gradient comes back in the input's dtype.
  const Tensor as_float = sum(x, {2}, false, kFloat32);
  CHECK(as_float.dtype() == kFloat32);
  CHECK(autograd::grad({sum(as_float)}, {x})[0].dtype() == kFloat64);
  check_reduction([](const Tensor& t) { return sum(t, {1}, false, kFloat64); }, x, "SumBackward1");
}

TEST_CASE("mean: gradients over dims and keepdim", "[reduction_grad]") {
  const Tensor x = random_leaf({2, 3, 4}, 5);
  check_reduction([](const Tensor& t) { return mean(t); }, x, "MeanBackward0");
  for (bool keepdim : {false, true}) {
    check_reduction([&](const Tensor& t) { return mean(t, {0, 2}, keepdim); }, x, "MeanBackward1");
    check_reduction([&](const Tensor& t) { return mean(t, {-2}, keepdim); }, x, "MeanBackward1");
  }
  check_reduction([](const Tensor& t) { return mean(t, {1}); }, transposed_leaf({3, 4}, 6),
                  "MeanBackward1");
  check_reduction([](const Tensor& t) { return mean(t, {1}); }, random_leaf({0, 3}, 7),
                  "MeanBackward1");
}

TEST_CASE("sum, mean and var: second derivatives", "[reduction_grad]") {
  const Tensor x = random_leaf({3, 4}, 8);
  check_second_order([](const Tensor& t) { return sum(t); }, x);
  check_second_order([](const Tensor& t) { return sum(t, {0}, true); }, x);
  check_second_order([](const Tensor& t) { return mean(t, {-1}); }, x);
  check_second_order([](const Tensor& t) { return mean(t); }, transposed_leaf({3, 4}, 9));
  check_second_order([](const Tensor& t) { return var(t, {1}); }, x);
  check_second_order([](const Tensor& t) { return var(t, {}, 0.0, true); }, x);
}

TEST_CASE("prod, amax, max(dim) and norm: backward records under create_graph",
          "[reduction_grad]") {
  const Tensor x = random_leaf({3, 4}, 30, 0.5, 1.5);
  check_second_order([](const Tensor& t) { return prod(t, {1}); }, x);
  // At one and two zeros per slice too (prod's gradient is a polynomial: exact differences).
  const Tensor zeros = values({2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 1.5, 0.0, 0.0}, {3, 3});
  check_second_order([](const Tensor& t) { return prod(t, {1}); }, zeros);
  check_second_order([](const Tensor& t) { return prod(t, {0}, true); }, zeros);
  check_second_order([](const Tensor& t) { return prod(t); }, values({2.0, 0.0, 3.0, 4.0}, {4}));
  check_second_order([](const Tensor& t) { return prod(t); }, values({2.0, 0.0, 3.0, 0.0}, {4}));
  check_second_order([](const Tensor& t) { return amax(t, {0}); }, x);
  check_second_order([](const Tensor& t) { return min(t, 1).first; }, x);
  check_second_order([](const Tensor& t) { return norm(t, 2.0, {1}); }, x);
  check_second_order([](const Tensor& t) { return norm(t, 3.0); }, x);
}

TEST_CASE("prod: gradients with no zero, one zero and several zeros", "[reduction_grad]") {
  const Tensor x = random_leaf({2, 3, 4}, 10, 0.5, 1.5);
  check_reduction([](const Tensor& t) { return prod(t); }, x, "ProdBackward0");
  for (bool keepdim : {false, true}) {
    check_reduction([&](const Tensor& t) { return prod(t, {1}, keepdim); }, x, "ProdBackward1");
    check_reduction([&](const Tensor& t) { return prod(t, {0, -1}, keepdim); }, x, "ProdBackward1");
  }
  check_reduction([](const Tensor& t) { return prod(t, {0}); }, transposed_leaf({3, 4}, 11),
                  "ProdBackward1");
  check_reduction([](const Tensor& t) { return prod(t, {1}); }, random_leaf({0, 3}, 12),
                  "ProdBackward1");

  // prod is linear in each element, so central differences are exact at zeros too.
  const Tensor one_zero = values({2.0, 0.0, 3.0, 4.0}, {4});
  check_grad_values(grad_of([](const Tensor& t) { return prod(t); }, one_zero),
                    {0.0, 24.0, 0.0, 0.0});
  check_reduction([](const Tensor& t) { return prod(t); }, one_zero, "ProdBackward0");
  const Tensor two_zeros = values({2.0, 0.0, 3.0, 0.0}, {4});
  check_grad_values(grad_of([](const Tensor& t) { return prod(t); }, two_zeros),
                    {0.0, 0.0, 0.0, 0.0});
  check_reduction([](const Tensor& t) { return prod(t); }, two_zeros, "ProdBackward0");
  // Rows without, with one and with two zeros, reduced together.
  const Tensor rows = values({1.0, 2.0, 3.0, 4.0, 0.0, 5.0, 0.0, 6.0, 0.0}, {3, 3});
  check_grad_values(grad_of([](const Tensor& t) { return prod(t, {1}); }, rows),
                    {6.0, 3.0, 2.0, 0.0, 20.0, 0.0, 0.0, 0.0, 0.0});
  check_reduction([](const Tensor& t) { return prod(t, {1}, true); }, rows, "ProdBackward1");
  check_reduction([](const Tensor& t) { return prod(t, {0}); }, rows, "ProdBackward1");
}

TEST_CASE("amax, amin, max(), min(): gradients, split evenly among ties", "[reduction_grad]") {
  const Tensor x = random_leaf({2, 3, 4}, 13);  // distinct values: differentiable
  check_reduction([](const Tensor& t) { return amax(t); }, x, "AmaxBackward0");
  check_reduction([](const Tensor& t) { return amin(t); }, x, "AminBackward0");
  check_reduction([](const Tensor& t) { return max(t); }, x, "MaxBackward1");
  check_reduction([](const Tensor& t) { return min(t); }, x, "MinBackward1");
  for (bool keepdim : {false, true}) {
    check_reduction([&](const Tensor& t) { return amax(t, {1}, keepdim); }, x, "AmaxBackward0");
    check_reduction([&](const Tensor& t) { return amin(t, {-1, 0}, keepdim); }, x, "AminBackward0");
  }
  check_reduction([](const Tensor& t) { return amax(t, {0}); }, transposed_leaf({3, 4}, 14),
                  "AmaxBackward0");
  check_reduction([](const Tensor& t) { return amax(t, {1}); }, random_leaf({0, 3}, 15),
                  "AmaxBackward0");

  const Tensor ties = values({1.0, 3.0, 3.0, 2.0, -1.0, -1.0}, {2, 3});
  check_grad_values(grad_of([](const Tensor& t) { return amax(t); }, ties),
                    {0.0, 0.5, 0.5, 0.0, 0.0, 0.0});
  check_grad_values(grad_of([](const Tensor& t) { return max(t); }, ties),
                    {0.0, 0.5, 0.5, 0.0, 0.0, 0.0});
  check_grad_values(grad_of([](const Tensor& t) { return min(t); }, ties),
                    {0.0, 0.0, 0.0, 0.0, 0.5, 0.5});
  check_grad_values(grad_of([](const Tensor& t) { return amin(t, {1}); }, ties),
                    {1.0, 0.0, 0.0, 0.0, 0.5, 0.5});
  // max() / min() of a tensor holding NaNs: the NaNs share the gradient, as PyTorch.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = values({1.0, nan, 2.0, nan}, {4});
  check_grad_values(grad_of([](const Tensor& t) { return max(t); }, with_nan),
                    {0.0, 0.5, 0.0, 0.5});
  check_grad_values(grad_of([](const Tensor& t) { return min(t); }, with_nan),
                    {0.0, 0.5, 0.0, 0.5});
}

TEST_CASE("max(dim), min(dim): the value's gradient goes to the returned index",
          "[reduction_grad]") {
  const Tensor x = random_leaf({2, 3, 4}, 16);
  for (bool keepdim : {false, true}) {
    check_reduction([&](const Tensor& t) { return max(t, 1, keepdim).first; }, x, "MaxBackward0");
    check_reduction([&](const Tensor& t) { return min(t, -1, keepdim).first; }, x, "MinBackward0");
  }
  check_reduction([](const Tensor& t) { return max(t, 0).first; }, transposed_leaf({3, 4}, 17),
                  "MaxBackward0");
  check_reduction([](const Tensor& t) { return min(t, 1).first; }, random_leaf({0, 3}, 18),
                  "MinBackward0");
  check_reduction([](const Tensor& t) { return max(t, 0).first; }, random_leaf({}, 19),
                  "MaxBackward0");

  const auto [vals, idx] = max(x, 2);
  CHECK(idx.dtype() == kInt64);
  CHECK_FALSE(idx.requires_grad());
  CHECK(idx.grad_fn() == nullptr);
  // Ties: the first maximum is returned and gets the whole gradient.
  const Tensor ties = values({1.0, 3.0, 3.0, 2.0, 2.0, -1.0}, {2, 3});
  check_grad_values(grad_of([](const Tensor& t) { return max(t, 1).first; }, ties),
                    {0.0, 1.0, 0.0, 1.0, 0.0, 0.0});
  check_grad_values(grad_of([](const Tensor& t) { return min(t, 0, true).first; }, ties),
                    {1.0, 0.0, 0.0, 0.0, 1.0, 1.0});
}

TEST_CASE("argmax and argmin never record", "[reduction_grad]") {
  const Tensor x = random_leaf({3, 4}, 20);
  for (const Tensor& r : {argmax(x), argmax(x, 1), argmin(x), argmin(x, 0, true)}) {
    CHECK(r.dtype() == kInt64);
    CHECK_FALSE(r.requires_grad());
    CHECK(r.grad_fn() == nullptr);
  }
}

TEST_CASE("var: gradients over dims, correction and keepdim", "[reduction_grad]") {
  const Tensor x = random_leaf({2, 3, 4}, 21);
  check_reduction([](const Tensor& t) { return var(t); }, x, "VarBackward0");
  for (bool keepdim : {false, true}) {
    for (double correction : {0.0, 1.0, 2.0}) {
      check_reduction([&](const Tensor& t) { return var(t, {1}, correction, keepdim); }, x,
                      "VarBackward0");
      check_reduction(
          [&](const Tensor& t) {
            return var(t, {0, -1}, correction, keepdim);
          },
          x, "VarBackward0");
    }
  }
  check_reduction([](const Tensor& t) { return var(t, {0}); }, transposed_leaf({3, 4}, 22),
                  "VarBackward0");
  check_reduction([](const Tensor& t) { return var(t, {0}); }, random_leaf({0, 3}, 23),
                  "VarBackward0");
}

TEST_CASE("norm: gradients for p = 2, 1, inf, -inf, 0 and general p", "[reduction_grad]") {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = random_leaf({2, 3, 4}, 24);
  for (double p : {2.0, 1.0, inf, -inf, 3.0, 1.5, 0.5, -1.0}) {
    INFO("p = " << p);
    check_reduction([&](const Tensor& t) { return norm(t, p); }, x, "LinalgVectorNormBackward0");
    for (bool keepdim : {false, true}) {
      check_reduction([&](const Tensor& t) { return norm(t, p, {1}, keepdim); }, x,
                      "LinalgVectorNormBackward0");
      check_reduction(
          [&](const Tensor& t) {
            return norm(t, p, {-1, 0}, keepdim);
          },
          x, "LinalgVectorNormBackward0");
    }
    check_reduction([&](const Tensor& t) { return norm(t, p, {0}); }, transposed_leaf({3, 4}, 25),
                    "LinalgVectorNormBackward0");
  }
  check_reduction([](const Tensor& t) { return norm(t, 2.0, {0}); }, random_leaf({0, 3}, 26),
                  "LinalgVectorNormBackward0");
  check_grad_values(grad_of([](const Tensor& t) { return norm(t, 0.0, {1}); }, x),
                    std::vector<double>(24, 0.0));

  // At a zero norm the p = 2 gradient is 0, not 0 / 0.
  const Tensor zero_row = values({0.0, 0.0, 3.0, 4.0}, {2, 2});
  check_grad_values(grad_of([](const Tensor& t) { return norm(t, 2.0, {1}); }, zero_row),
                    {0.0, 0.0, 0.6, 0.8});
  check_grad_values(
      grad_of([](const Tensor& t) { return norm(t, 3.0, {1}); }, zero_row).narrow(0, 0, 1),
      {0.0, 0.0});
  // inf norm: split evenly among the elements of largest magnitude, with their signs.
  const Tensor ties = values({-2.0, 2.0, 1.0}, {3});
  check_grad_values(grad_of([&](const Tensor& t) { return norm(t, inf); }, ties), {-0.5, 0.5, 0.0});
}

TEST_CASE("reductions record nothing when nothing requires grad", "[reduction_grad]") {
  const Tensor x = random_leaf({3, 4}, 27).detach();
  for (const Tensor& r : {sum(x), prod(x, {0}), mean(x, {1}), amax(x), amin(x, {0}), max(x), min(x),
                          max(x, 1).first, min(x, 0).first, var(x), norm(x, 2.0, {1})}) {
    CHECK_FALSE(r.requires_grad());
    CHECK(r.grad_fn() == nullptr);
  }
  const Tensor leaf = random_leaf({3, 4}, 28);
  NoGradGuard no_grad;
  for (const Tensor& r : {sum(leaf), mean(leaf, {1}), max(leaf, 1).first, var(leaf)}) {
    CHECK_FALSE(r.requires_grad());
    CHECK(r.grad_fn() == nullptr);
  }
}

TEST_CASE("reductions that record raise the same errors", "[reduction_grad]") {
  const Tensor x = random_leaf({0, 3}, 29);
  CHECK_THROWS_WITH(amax(x), Catch::Contains("[amax]"));
  CHECK_THROWS_WITH(max(x), Catch::Contains("[max]"));
  CHECK_THROWS_WITH(min(x, 0), Catch::Contains("[min]"));
  CHECK_THROWS_WITH(sum(x, {2}), Catch::Contains("[sum]"));
  CHECK_THROWS_WITH(var(x, {0, 0}), Catch::Contains("[var]"));
}

}  // namespace
}  // namespace tessera::autograd_test
