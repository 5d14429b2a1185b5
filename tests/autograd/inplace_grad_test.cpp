// In-place binary ops under autograd (binary_op_, Tensor::operator+= -= *= /=): PyTorch's errors
// for leaves, gradients through recorded in-place updates, the version check of saved tensors, and
// the optimizer's in-place update under NoGradGuard.

#include <catch2/catch.hpp>
#include <vector>

#include "tests/autograd/op_inputs.h"
#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

TEST_CASE("in-place ops on a leaf that requires grad raise, naming the op", "[elementwise_grad]") {
  Tensor x = leaf({1.0, 2.0});
  const Tensor y = vec({3.0, 4.0}, Shape{2});
  CHECK_THROWS_WITH(x += y, Catch::Contains("[add_]") && Catch::Contains("leaf"));
  CHECK_THROWS_WITH(x -= 1.0, Catch::Contains("[sub_]"));
  CHECK_THROWS_WITH(x *= y, Catch::Contains("[mul_]"));
  CHECK_THROWS_WITH(x /= 2, Catch::Contains("[div_]"));
  CHECK_THROWS_WITH(binary_op_(BinaryOp::kPow, x, y), Catch::Contains("[pow_]"));
  // Nothing was written.
  check_values(x.detach(), {1.0, 2.0});
  CHECK(x.is_leaf());
}

TEST_CASE("in-place ops on non-leaves are recorded", "[elementwise_grad]") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor z = leaf({0.5, -1.0, 2.0});
  Tensor y = x * 2;
  y += z;
  CHECK(y.grad_fn() != nullptr);
  check_values(y.detach(), {2.5, 3.0, 8.0});
  y.backward(ones_like(y));
  check_values(x.grad(), {2.0, 2.0, 2.0});
  check_values(z.grad(), {1.0, 1.0, 1.0});

  // Chained: w = ((x * 1) * z - 1) / 2, all but the first op in place.
  x.set_grad(Tensor());
  z.set_grad(Tensor());
  Tensor w = x * 1;
  w *= z;
  w -= 1;
  w /= 2.0;
  check_values(w.detach(), {-0.25, -1.5, 2.5});
  w.backward(ones_like(w));
  check_values(x.grad(), {0.25, -0.5, 1.0});
  check_values(z.grad(), {0.5, 1.0, 1.5});
}

TEST_CASE("gradcheck through in-place ops", "[elementwise_grad]") {
  const auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0] * 2;  // not exp: it saves its output, which y *= would overwrite
    y *= in[1];
    y += in[1];
    y -= 0.5;
    y /= in[0];
    return y;
  };
  CHECK(autograd::gradcheck(fn, {positive_leaf({3, 4}, 1), random_leaf({4}, 2)}));
}

TEST_CASE("an in-place op whose other operand requires grad gives self a history",
          "[elementwise_grad]") {
  Tensor acc = zeros({3}, kFloat64);
  Tensor x = leaf({1.0, 2.0, 3.0});
  acc += x;
  acc *= x;
  CHECK(acc.requires_grad());
  CHECK(acc.grad_fn() != nullptr);
  acc.backward(ones_like(acc));
  check_values(x.grad(), {2.0, 4.0, 6.0});  // d(x * x)/dx
}

TEST_CASE("an in-place op keeps self's dtype; each input's gradient keeps its own",
          "[elementwise_grad]") {
  Tensor a = leaf({1.0, 2.0}).detach().to(kFloat32).requires_grad_();
  Tensor b = leaf({0.5, 4.0});
  Tensor y = a * 1;
  y += b;
  y *= b;
  REQUIRE(y.dtype() == kFloat32);
  check_values(y.detach(), {0.75, 24.0});
  y.backward(ones_like(y));
  CHECK(a.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat64);
  check_values(a.grad(), {0.5, 4.0});   // b
  check_values(b.grad(), {2.0, 10.0});  // a + 2b
}

TEST_CASE("modifying a tensor saved for backward makes backward raise, naming the node",
          "[elementwise_grad]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor b = leaf({3.0, 4.0});
  Tensor a = x * 1;
  Tensor out = a * b;  // MulBackward0 saved a for b's gradient
  a += 1;
  CHECK_THROWS_WITH(
      out.backward(ones_like(out)),
      Catch::Contains("MulBackward0") && Catch::Contains("modified by an inplace operation"));

  // exp saves its output; writing into the output invalidates it.
  Tensor e = exp(x * 1);
  Tensor loss = e * 1;
  e *= 2;
  CHECK_THROWS_WITH(
      loss.backward(ones_like(loss)),
      Catch::Contains("ExpBackward0") && Catch::Contains("modified by an inplace operation"));

  // Under NoGradGuard too: the version counter does not depend on grad mode.
  Tensor c = x * 1;
  Tensor t = tanh(c);
  {
    NoGradGuard no_grad;
    t += 1;
  }
  CHECK_THROWS_WITH(t.backward(ones_like(t)),
                    Catch::Contains("TanhBackward0") && Catch::Contains("modified by an inplace"));
}

TEST_CASE("under NoGradGuard an in-place update of a leaf works and records nothing",
          "[elementwise_grad]") {
  Tensor w = leaf({1.0, 2.0});
  (w * w).backward(ones_like(w));
  check_values(w.grad(), {2.0, 4.0});
  const uint64_t version = w.storage()->version();
  {
    NoGradGuard no_grad;
    w -= w.grad() * 0.5;  // the optimizer's step
    w *= 2;
  }
  check_values(w.detach(), {0.0, 0.0});
  CHECK(w.is_leaf());
  CHECK(w.grad_fn() == nullptr);
  CHECK(w.requires_grad());
  CHECK(w.storage()->version() == version + 2);
  check_values(w.grad(), {2.0, 4.0});
  // And it still trains.
  w.set_grad(Tensor());
  (w + 1).backward(ones_like(w));
  check_values(w.grad(), {1.0, 1.0});
}

TEST_CASE("an in-place comparison gives zero gradients, not the old history",
          "[elementwise_grad]") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor z = leaf({2.0});
  Tensor y = x * 3;
  binary_op_(BinaryOp::kGt, y, z);
  CHECK(y.grad_fn()->name() == "GtBackward1");
  check_values(y.detach(), {1.0, 1.0, 1.0});
  (y * x).backward(ones_like(y));
  check_values(x.grad(), {1.0, 1.0, 1.0});  // through y * x only
  check_values(z.grad(), {0.0});
}

TEST_CASE("in-place ops without grad take the plain path", "[elementwise_grad]") {
  Tensor a = vec({1.0, 2.0}, Shape{2});
  a += vec({1.0, 1.0}, Shape{2});
  a *= 3;
  check_values(a, {6.0, 9.0});
  CHECK(a.grad_fn() == nullptr);
  CHECK_FALSE(a.requires_grad());
}

TEST_CASE("in-place argument errors come first, with grad too", "[elementwise_grad]") {
  Tensor i = zeros({2}, kInt64);
  const Tensor x = leaf({0.5, 1.5});
  CHECK_THROWS_WITH(i += x, Catch::Contains("[add_]") && Catch::Contains("can't be cast"));
  Tensor y = x * 1;
  const Tensor big = leaf({1.0, 2.0, 3.0, 4.0}, Shape{2, 2});
  CHECK_THROWS_WITH(y *= big, Catch::Contains("[mul_]") && Catch::Contains("doesn't match"));
}

}  // namespace
}  // namespace tessera::autograd_test
