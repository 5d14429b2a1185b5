// Graphs far deeper than the stack could hold one frame per node (issue 21): backward through them,
// and dropping them with or without backward, must neither recurse per node nor leak. See Note
// [Releasing deep graphs] in autograd/node.cpp.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>

#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

// Recursive release took 48 bytes of stack per node for the cheapest chain at -O2 (more under
// ASan), so even the sanitizer count overflowed an 8 MiB stack. Under ASan a million-op chain
// takes ~4 GB (redzones, quarantine) and ~25 s; 300,000 ops take a quarter of that.
#ifdef TESSERA_TEST_UNDER_SANITIZER
constexpr int64_t kChainLength = 300'000;
#else
constexpr int64_t kChainLength = 1'000'000;
#endif

int64_t chain_length() {
  std::cout << "deep graph: chains of " << kChainLength << " ops\n";
  return kChainLength;
}

TEST_CASE("backward through a chain of a million ops", "[autograd]") {
  const int64_t n = chain_length();
  constexpr double kFactor = 1.0000001;
  Tensor x = leaf({0.5, -2.0});
  Tensor y = x;
  for (int64_t i = 0; i < n; ++i) y = y * kFactor;
  const std::weak_ptr<autograd::Node> last = y.grad_fn();
  sum(y).backward();
  const double expected = std::pow(kFactor, static_cast<double>(n));
  const std::vector<double> grad = x.grad().to_vector<double>();
  REQUIRE(grad.size() == 2);
  CHECK(grad[0] == Approx(expected).epsilon(1e-9));
  CHECK(grad[1] == Approx(expected).epsilon(1e-9));
  CHECK(y.to_vector<double>()[1] == Approx(-2.0 * expected).epsilon(1e-9));
  y = Tensor();
  CHECK(last.expired());
}

// Each step links to the previous one by a next edge and, for y * w, also by the saved input y
// (a strong path through its TensorImpl); tanh saves its output, which refers back weakly.
TEST_CASE("dropping a chain of a million ops without backward frees all of it", "[autograd]") {
  const int64_t n = chain_length();
  Tensor x = leaf({0.5, -0.25});
  Tensor w = leaf({1.0, 1.0});
  std::weak_ptr<autograd::Node> first;
  std::weak_ptr<autograd::Node> last;
  {
    Tensor y = x;
    for (int64_t i = 0; i < n; ++i) {
      switch (i % 3) {
        case 0:
          y = y * 1.0;
          break;
        case 1:
          y = y * w;
          break;
        default:
          y = tanh(y);
          break;
      }
      if (i == 0) first = y.grad_fn();
    }
    last = y.grad_fn();
    CHECK_FALSE(first.expired());
  }
  CHECK(first.expired());
  CHECK(last.expired());
  CHECK_FALSE(x.grad().defined());
  sum(x * w).backward();
  check_values(x.grad(), {1.0, 1.0});
}

struct Kept {
  Tensor tensor;
};

// Saves a tensor that is not one of its inputs, so that its node holds the previous node only
// through that saved tensor's grad_fn: no next edge leads there.
struct KeepFn : Function<KeepFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Kept& kept) {
    ctx->save_for_backward({kept.tensor});
    return mul(x, 2.0);
  }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    return {ScaleFn::apply(grads[0], 2.0)};
  }
};

TEST_CASE("a chain held only through saved tensors is freed without recursion", "[autograd]") {
  const int64_t n = chain_length();
  Tensor x = leaf({1.0});
  std::weak_ptr<autograd::Node> first;
  {
    Tensor prev = KeepFn::apply(x, Kept{Tensor()});
    first = prev.grad_fn();
    for (int64_t i = 1; i < n; ++i) prev = KeepFn::apply(x, Kept{prev});
    CHECK(first.lock()->next_edges().size() == 1);
  }
  CHECK(first.expired());
}

}  // namespace
}  // namespace tessera::autograd_test
