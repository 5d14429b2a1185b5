// Grad mode is per thread; backward passes on several threads at once and a backward inside a
// backward (reentrant) each keep their own engine state.

#include <catch2/catch.hpp>
#include <cmath>
#include <thread>

#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

TEST_CASE("grad mode is thread-local", "[autograd]") {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread t([&] { other_thread_enabled = is_grad_enabled(); });
  t.join();
  CHECK(other_thread_enabled);
  CHECK_FALSE(is_grad_enabled());
}

TEST_CASE("independent backward passes on concurrent threads", "[autograd]") {
  constexpr int kThreads = 4;
  constexpr int kIterations = 50;
  std::vector<std::vector<double>> results(kThreads);
  std::vector<std::thread> threads;
  for (int r = 0; r < kThreads; ++r) {
    threads.emplace_back([r, &results] {
      const double v = 0.1 * (r + 1);
      Tensor x = leaf({v, -v});
      for (int i = 0; i < kIterations; ++i) {
        // A diamond plus a second-order pass, so each thread exercises create_graph too.
        Tensor y = SumFn::apply(MulFn::apply(SquareFn::apply(x), ExpFn::apply(x)));
        Tensor g = autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
        SumFn::apply(g).backward();
      }
      results[r] = x.grad().to_vector<double>();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kThreads; ++r) {
    const double v = 0.1 * (r + 1);
    std::vector<double> expected;
    // d2/dx2 x^2 e^x = (2 + 4x + x^2) e^x, accumulated kIterations times.
    for (double x : {v, -v}) expected.push_back(kIterations * (2 + 4 * x + x * x) * std::exp(x));
    REQUIRE(results[r].size() == 2);
    for (size_t i = 0; i < 2; ++i) CHECK(results[r][i] == Approx(expected[i]).epsilon(1e-10));
  }
}

// Its backward runs a whole backward pass of its own (reentrant engine use).
struct ReentrantFn : Function<ReentrantFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return mul(x, x);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    Tensor x = ctx->saved()[0].detach();
    x.requires_grad_();
    Tensor dx;
    {
      EnableGradGuard enable;
      dx = autograd::grad({SumFn::apply(SquareFn::apply(x))}, {x})[0];  // 2x
    }
    CHECK_FALSE(is_grad_enabled());  // the outer pass's mode is restored
    return {mul(grads[0], dx)};
  }
};

TEST_CASE("backward inside a Function's backward", "[autograd]") {
  Tensor x = leaf({1.5, -0.5});
  SumFn::apply(ReentrantFn::apply(x)).backward();
  check_values(x.grad(), {3.0, -1.0});
}

}  // namespace
}  // namespace tessera::autograd_test
