// autograd::Function: several outputs, non-differentiable outputs, inputs returned as is, saved
// tensors and data, and when a Function records.

#include <catch2/catch.hpp>
#include <string>

#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

// (x * 2, x * 3): two outputs; backward sees a zero gradient for an unused one.
struct TwoOutputsFn : Function<TwoOutputsFn> {
  static std::vector<Tensor> forward(AutogradContext* /*ctx*/, const Tensor& x) {
    return {mul(x, 2.0), mul(x, 3.0)};
  }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    REQUIRE(grads.size() == 2);
    REQUIRE(grads[0].defined());
    REQUIRE(grads[1].defined());
    return {AddFn::apply(ScaleFn::apply(grads[0], 2.0), ScaleFn::apply(grads[1], 3.0))};
  }
};

TEST_CASE("a Function with two outputs", "[autograd]") {
  Tensor x = leaf({1.0, -2.0});
  std::vector<Tensor> ys = TwoOutputsFn::apply(x);
  REQUIRE(ys.size() == 2);
  CHECK(ys[0].output_nr() == 0);
  CHECK(ys[1].output_nr() == 1);
  CHECK(ys[0].grad_fn() == ys[1].grad_fn());
  SumFn::apply(ys[1]).backward({}, {.retain_graph = true});  // ys[0] gets no gradient
  check_values(x.grad(), {3.0, 3.0});
  x.set_grad(Tensor());
  SumFn::apply(AddFn::apply(ys[0], ys[1])).backward();
  check_values(x.grad(), {5.0, 5.0});
}

// Returns (x, argmax-like int64 index, x * 1 marked non-differentiable); backward checks what it
// gets, and sees undefined gradients when materialization is off.
struct MixedOutputsFn : Function<MixedOutputsFn> {
  static const char* name() { return "MixedOutputs"; }
  static std::vector<Tensor> forward(AutogradContext* ctx, const Tensor& x) {
    Tensor copy = x.clone();
    ctx->mark_non_differentiable({copy});
    ctx->set_materialize_grads(false);
    return {x, zeros({1}, kInt64), copy};
  }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    CHECK_FALSE(grads[1].defined());
    CHECK_FALSE(grads[2].defined());
    return {grads[0]};
  }
};

TEST_CASE("inputs returned as is, integer and non-differentiable outputs", "[autograd]") {
  Tensor x = leaf({4.0, 5.0});
  std::vector<Tensor> ys = MixedOutputsFn::apply(x);
  // The input keeps being a leaf; the output is a new tensor on the same storage.
  CHECK(x.is_leaf());
  CHECK(ys[0].unsafe_impl() != x.unsafe_impl());
  CHECK(ys[0].is_alias_of(x));
  CHECK(ys[0].grad_fn()->name() == "MixedOutputs");
  CHECK_FALSE(ys[1].requires_grad());
  CHECK_FALSE(ys[2].requires_grad());
  SumFn::apply(ys[0]).backward();
  check_values(x.grad(), {1.0, 1.0});
}

TEST_CASE("a Function records only when grad mode is on and an input requires grad", "[autograd]") {
  Tensor c = vec({1.0, 2.0}, Shape{2});
  Tensor y = ScaleFn::apply(c, 2.0);
  CHECK_FALSE(y.requires_grad());
  CHECK(y.grad_fn() == nullptr);
  check_values(y, {2.0, 4.0});
  Tensor x = leaf({1.0, 2.0});
  CHECK(ScaleFn::apply(x, 2.0).requires_grad());
  NoGradGuard no_grad;
  CHECK_FALSE(ScaleFn::apply(x, 2.0).requires_grad());
}

// Saves an input and an output and reads them back in backward.
struct SavedFn : Function<SavedFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, int64_t k) {
    Tensor y = mul(x, static_cast<double>(k));
    ctx->save_for_backward({x, y, Tensor()});
    ctx->saved_data["k"] = k;
    ctx->saved_data["tag"] = std::string("saved");
    return y;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    std::vector<Tensor> s = ctx->saved();
    REQUIRE(s.size() == 3);
    CHECK(s[0].is_leaf());
    CHECK(s[1].grad_fn() != nullptr);  // the output, rebuilt with its history
    CHECK_FALSE(s[2].defined());
    CHECK(std::any_cast<std::string>(ctx->saved_data["tag"]) == "saved");
    return {ScaleFn::apply(grads[0],
                           static_cast<double>(std::any_cast<int64_t>(ctx->saved_data["k"])))};
  }
};

TEST_CASE("saved tensors and saved data", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = SavedFn::apply(x, int64_t{4});
  Tensor loss = SumFn::apply(y);
  std::weak_ptr<autograd::Node> node = y.grad_fn();
  loss.backward();
  check_values(x.grad(), {4.0, 4.0});
  // The node's saved output does not keep the node alive.
  y = Tensor();
  loss = Tensor();
  CHECK(node.expired());
  // Without a backward (nothing released), saving an output makes no cycle either.
  Tensor z = SavedFn::apply(x, int64_t{2});
  std::weak_ptr<autograd::Node> unused_node = z.grad_fn();
  z = Tensor();
  CHECK(unused_node.expired());
}

}  // namespace
}  // namespace tessera::autograd_test
