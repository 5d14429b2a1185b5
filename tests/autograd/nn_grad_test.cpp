// Gradients of softmax, log_softmax, layer_norm and rms_norm: gradcheck on contiguous,
// transposed, batched and zero-size inputs, gradgradcheck, and recording behaviour.

#include <catch2/catch.hpp>

#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using Inputs = std::vector<Tensor>;

// The forward with grad equals the one without, and only the former records `name`.
template <typename F>
void check_forward_and_record(const F& f, const Inputs& leaves, const char* name) {
  Tensor with = f(leaves);
  REQUIRE(with.grad_fn() != nullptr);
  CHECK(with.grad_fn()->name() == name);
  Inputs plain;
  for (const Tensor& t : leaves) plain.push_back(t.defined() ? t.detach() : t);
  Tensor without = f(plain);
  CHECK(without.grad_fn() == nullptr);
  CHECK_FALSE(without.requires_grad());
  CHECK(allclose(with, without, 0.0, 0.0));
}

TEST_CASE("softmax and log_softmax gradients", "[nn_grad]") {
  for (auto op : {&softmax, &log_softmax}) {
    for (int64_t dim : {0, 1, -1}) {
      auto f = [op, dim](const Inputs& in) { return op(in[0], dim); };
      CHECK(gradcheck(f, {random_leaf({3, 4}, 1)}));
      CHECK(gradcheck(f, {transposed_leaf({4, 5}, 2)}));
      CHECK(gradcheck(f, {random_leaf({2, 3, 4}, 3)}));
      CHECK(gradcheck(f, {random_leaf({0, 3}, 4)}));
    }
    auto scalar = [op](const Inputs& in) { return op(in[0], -1); };
    CHECK(gradcheck(scalar, {random_leaf({}, 5)}));
  }
  check_forward_and_record([](const Inputs& in) { return softmax(in[0], 1); },
                           {random_leaf({2, 3}, 6)}, "SoftmaxBackward0");
  check_forward_and_record([](const Inputs& in) { return log_softmax(in[0], 0); },
                           {random_leaf({2, 3}, 7)}, "LogSoftmaxBackward0");
}

TEST_CASE("softmax and log_softmax second derivatives", "[nn_grad]") {
  for (auto op : {&softmax, &log_softmax}) {
    auto f = [op](const Inputs& in) { return op(in[0], -1); };
    CHECK(gradgradcheck(f, {random_leaf({3, 4}, 8)}));
    CHECK(gradgradcheck(f, {transposed_leaf({3, 4}, 9)}));
    auto f0 = [op](const Inputs& in) { return op(in[0], 0); };
    CHECK(gradgradcheck(f0, {random_leaf({3, 2, 2}, 10)}));
  }
}

TEST_CASE("softmax input errors are unchanged under grad", "[nn_grad]") {
  Tensor x = random_leaf({2, 3}, 11);
  CHECK_THROWS_WITH(softmax(x, 2), Catch::Contains("[softmax]"));
  CHECK_THROWS_WITH(log_softmax(x, -3), Catch::Contains("[log_softmax]"));
}

TEST_CASE("layer_norm gradients", "[nn_grad]") {
  auto with_params = [](const Shape& ns) {
    return [ns](const Inputs& in) { return layer_norm(in[0], ns, in[1], in[2], 1e-5); };
  };
  CHECK(gradcheck(with_params({4}),
                  {random_leaf({2, 3, 4}, 1), random_leaf({4}, 2), random_leaf({4}, 3)}));
  // Several normalized dims, non-contiguous input and weight.
  CHECK(gradcheck(with_params({3, 4}),
                  {random_leaf({2, 3, 4}, 4), transposed_leaf({3, 4}, 5), random_leaf({3, 4}, 6)}));
  CHECK(gradcheck(with_params({5}),
                  {transposed_leaf({2, 4, 5}, 7), random_leaf({5}, 8), random_leaf({5}, 9)}));
  CHECK(gradcheck(with_params({4}),
                  {random_leaf({0, 4}, 10), random_leaf({4}, 11), random_leaf({4}, 12)}));
  CHECK(gradcheck(with_params({0}),
                  {random_leaf({2, 0}, 27), random_leaf({0}, 28), random_leaf({0}, 29)}));
  // Optional parameters, and parameters that do not require grad.
  auto no_params = [](const Inputs& in) { return layer_norm(in[0], {3, 4}); };
  CHECK(gradcheck(no_params, {random_leaf({2, 3, 4}, 13)}));
  auto weight_only = [](const Inputs& in) { return layer_norm(in[0], {4}, in[1]); };
  CHECK(gradcheck(weight_only, {random_leaf({3, 4}, 14), random_leaf({4}, 15)}));
  auto bias_only = [](const Inputs& in) { return layer_norm(in[0], {4}, {}, in[1]); };
  CHECK(gradcheck(bias_only, {random_leaf({3, 4}, 25), random_leaf({4}, 26)}));
  CHECK(gradcheck(with_params({4}),
                  {random_leaf({3, 4}, 16), random_leaf({4}, 17).detach(), random_leaf({4}, 18)}));
  CHECK(gradcheck(with_params({4}),
                  {random_leaf({3, 4}, 19).detach(), random_leaf({4}, 20), random_leaf({4}, 21)}));
  check_forward_and_record(with_params({4}),
                           {random_leaf({2, 4}, 22), random_leaf({4}, 23), random_leaf({4}, 24)},
                           "NativeLayerNormBackward0");
}

TEST_CASE("layer_norm second derivatives", "[nn_grad]") {
  auto f = [](const Inputs& in) { return layer_norm(in[0], {4}, in[1], in[2]); };
  CHECK(gradgradcheck(f, {random_leaf({3, 4}, 1), random_leaf({4}, 2), random_leaf({4}, 3)}));
  auto g = [](const Inputs& in) { return layer_norm(in[0], {2, 3}); };
  CHECK(gradgradcheck(g, {transposed_leaf({2, 2, 3}, 4)}));
}

TEST_CASE("rms_norm gradients", "[nn_grad]") {
  auto with_weight = [](const Shape& ns) {
    return [ns](const Inputs& in) { return rms_norm(in[0], ns, in[1]); };
  };
  CHECK(gradcheck(with_weight({4}), {random_leaf({2, 3, 4}, 1), random_leaf({4}, 2)}));
  CHECK(gradcheck(with_weight({3, 4}), {random_leaf({2, 3, 4}, 3), transposed_leaf({3, 4}, 4)}));
  CHECK(gradcheck(with_weight({5}), {transposed_leaf({2, 4, 5}, 5), random_leaf({5}, 6)}));
  CHECK(gradcheck(with_weight({4}), {random_leaf({0, 4}, 7), random_leaf({4}, 8)}));
  CHECK(gradcheck(with_weight({0}), {random_leaf({2, 0}, 14), random_leaf({0}, 15)}));
  auto no_weight = [](const Inputs& in) { return rms_norm(in[0], {4}, {}, 1e-3); };
  CHECK(gradcheck(no_weight, {random_leaf({3, 4}, 9)}));
  CHECK(gradcheck(with_weight({4}), {random_leaf({3, 4}, 10).detach(), random_leaf({4}, 11)}));
  check_forward_and_record(with_weight({4}), {random_leaf({2, 4}, 12), random_leaf({4}, 13)},
                           "RmsNormBackward0");
}

TEST_CASE("rms_norm second derivatives", "[nn_grad]") {
  auto f = [](const Inputs& in) { return rms_norm(in[0], {4}, in[1]); };
  CHECK(gradgradcheck(f, {random_leaf({3, 4}, 1), random_leaf({4}, 2)}));
  auto g = [](const Inputs& in) { return rms_norm(in[0], {2, 3}, {}, 1e-2); };
  CHECK(gradgradcheck(g, {random_leaf({2, 2, 3}, 3)}));
}

// Gradients of float16 / float32 inputs take their input's dtype and agree with float64 ones.
TEST_CASE("norm and softmax gradients in reduced precision", "[nn_grad]") {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const Fn fns[] = {
      [](const Tensor& x, const Tensor& w) { return layer_norm(x, {4}, w, w); },
      [](const Tensor& x, const Tensor& w) { return rms_norm(x, {4}, w); },
      [](const Tensor& x, const Tensor& w) { return log_softmax(x * w, -1); },
  };
  for (Fn fn : fns) {
    const Tensor x64 = random_leaf({3, 4}, 1);
    const Tensor w64 = random_leaf({4}, 2);
    const Tensor v = random_leaf({3, 4}, 3).detach();
    const std::vector<Tensor> ref = autograd::grad({fn(x64, w64)}, {x64, w64}, {v});
    for (DType dt : {kFloat16, kFloat32}) {
      Tensor x = x64.detach().to(dt).requires_grad_();
      Tensor w = w64.detach().to(kFloat32).requires_grad_();  // float32 weight: mixed precision
      const std::vector<Tensor> got = autograd::grad({fn(x, w)}, {x, w}, {v.to(dt)});
      CHECK(got[0].dtype() == dt);
      CHECK(got[1].dtype() == kFloat32);
      const double tol = dt == kFloat16 ? 2e-2 : 1e-5;
      CHECK(allclose(got[0].to(kFloat64), ref[0], tol, tol));
      CHECK(allclose(got[1].to(kFloat64), ref[1], tol, tol));
    }
  }
}

TEST_CASE("norm input errors are unchanged under grad", "[nn_grad]") {
  Tensor x = random_leaf({2, 3}, 1);
  CHECK_THROWS_WITH(layer_norm(x, {4}), Catch::Contains("[layer_norm]"));
  CHECK_THROWS_WITH(layer_norm(x, {3}, random_leaf({2}, 2)), Catch::Contains("[layer_norm]"));
  CHECK_THROWS_WITH(rms_norm(x, {2, 3, 4}), Catch::Contains("[rms_norm]"));
}

}  // namespace
}  // namespace tessera::autograd_test
