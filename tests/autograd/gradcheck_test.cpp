// Second derivatives through create_graph, gradcheck and gradgradcheck on correct Functions and on
// a deliberately wrong one.

#include <catch2/catch.hpp>

#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;

TEST_CASE("create_graph gives second derivatives: d2/dx2 x^3 = 6x", "[autograd]") {
  Tensor x = leaf({0.5, -1.0, 2.0});
  Tensor y = SumFn::apply(cube(x));
  std::vector<Tensor> g = autograd::grad({y}, {x}, {}, {.create_graph = true});
  check_values(g[0], {0.75, 3.0, 12.0});  // 3x^2
  REQUIRE(g[0].requires_grad());
  std::vector<Tensor> g2 = autograd::grad({SumFn::apply(g[0])}, {x});
  check_values(g2[0], {3.0, -6.0, 12.0});

  // Through .grad(): backward(create_graph) stores a gradient that has a graph.
  SumFn::apply(cube(x)).backward({}, {.create_graph = true});
  Tensor first = x.grad();
  REQUIRE(first.grad_fn() != nullptr);
  x.set_grad(Tensor());
  SumFn::apply(first).backward();
  check_values(x.grad(), {3.0, -6.0, 12.0});
  x.set_grad(Tensor());  // drops the x -> grad -> graph -> x cycle
}

TEST_CASE("third derivative", "[autograd]") {
  Tensor x = leaf({1.5});
  Tensor g1 = autograd::grad({SumFn::apply(cube(x))}, {x}, {}, {.create_graph = true})[0];
  Tensor g2 = autograd::grad({SumFn::apply(g1)}, {x}, {}, {.create_graph = true})[0];
  Tensor g3 = autograd::grad({SumFn::apply(g2)}, {x})[0];
  check_values(g3, {6.0});
}

TEST_CASE("gradcheck passes on correct Functions", "[autograd]") {
  Tensor a = leaf({0.3, -0.7, 1.1, 0.2}, Shape{2, 2});
  Tensor b = leaf({1.3, 0.4, -0.5, 2.0}, Shape{2, 2});
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return SquareFn::apply(in[0]); }, {a}));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return ExpFn::apply(in[0]); }, {a}));
  CHECK(gradcheck(
      [](const std::vector<Tensor>& in) { return MulFn::apply(ExpFn::apply(in[0]), cube(in[1])); },
      {a, b}));
  // Several outputs, and an input that does not require grad.
  Tensor c = vec({2.0, 3.0, 4.0, 5.0}, Shape{2, 2});
  CHECK(gradcheck(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{SumFn::apply(MulFn::apply(in[0], in[1])),
                                   SquareFn::apply(in[0])};
      },
      {a, c}));
}

TEST_CASE("gradcheck fails on a wrong backward", "[autograd]") {
  Tensor a = leaf({0.3, -0.7, 1.1});
  CHECK_THROWS_WITH(
      gradcheck([](const std::vector<Tensor>& in) { return WrongSquareFn::apply(in[0]); }, {a}),
      Catch::Contains("[gradcheck] Jacobian mismatch for input 0, input element 0, output element "
                      "0: numerical 0.6") &&
          Catch::Contains("vs analytical 0.9"));
  CHECK_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return SquareFn::apply(in[0]); },
                              {leaf({1.0}).detach().to(kFloat32).requires_grad_()}),
                    Catch::Contains("[gradcheck] input 0 requires grad and must be float64"));
}

// x^2 whose first derivative is right but whose second is wrong: backward's own backward scales
// by 3 instead of 2.
struct WrongSecondScaleFn : Function<WrongSecondScaleFn> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& a) { return mul(a, 2.0); }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    return {ScaleFn::apply(grads[0], 3.0)};
  }
};
struct WrongSecondSquareFn : Function<WrongSecondSquareFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return mul(x, x);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {WrongSecondScaleFn::apply(MulFn::apply(grads[0], ctx->saved()[0]))};
  }
};

TEST_CASE("gradgradcheck", "[autograd]") {
  Tensor a = leaf({0.3, -0.7, 1.1});
  Tensor b = leaf({0.9, 0.4, -1.2});
  CHECK(gradgradcheck(
      [](const std::vector<Tensor>& in) {
        return MulFn::apply(SquareFn::apply(in[0]), ExpFn::apply(in[1]));
      },
      {a, b}));
  CHECK(
      gradgradcheck([](const std::vector<Tensor>& in) { return SumFn::apply(cube(in[0])); }, {a}));
  auto wrong = [](const std::vector<Tensor>& in) { return WrongSecondSquareFn::apply(in[0]); };
  CHECK(gradcheck(wrong, {a}));
  CHECK_THROWS_WITH(gradgradcheck(wrong, {a}), Catch::Contains("[gradcheck] Jacobian mismatch"));
}

}  // namespace
}  // namespace tessera::autograd_test
