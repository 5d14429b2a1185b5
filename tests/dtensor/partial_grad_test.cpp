// Gradients that stay Partial into the redistribute that made their input Replicate.

#include <catch2/catch.hpp>
#include <map>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

// Note [Partial gradients into a redistribute]: S(0) -> R, then used beside a sharded output.
// With only such uses the gradient comes back with one reduce_scatter; with another use whose
// gradient is Replicate, or a hook on the redistributed tensor, it is all_reduced first. Every
// case gives the single-device gradient.
TEST_CASE("redistribute gradients: Partial uses of a gathered input reduce_scatter once",
          "[dtensor][redistribute][grad]") {
  const Tensor x = ints({8, 6}, 1) / 10;
  const Tensor w = ints({6, 4}, 2) / 10;
  enum class Use { kTwoMatmuls, kPlusReplicate, kHook };
  for (Use use : {Use::kTwoMatmuls, Use::kPlusReplicate, Use::kHook}) {
    INFO("case " << static_cast<int>(use));
    Tensor xr = x.clone().requires_grad_();
    auto single = [&](const Tensor& h) {
      Tensor loss = sum(matmul(h, w) * matmul(h, w));
      if (use == Use::kTwoMatmuls) loss = loss + sum(matmul(h, w * 3));
      if (use == Use::kPlusReplicate) loss = loss + sum(h * h);
      return loss;
    };
    single(xr).backward();
    on_mesh({4}, [&](const DeviceMesh& mesh) {
      Failures f;
      const Tensor xd = distribute_tensor(x, mesh, {Shard(0)}).requires_grad_();
      const Tensor wd = distribute_tensor(w, mesh, {Shard(1)});
      const Tensor h = DTensor(xd).redistribute({Replicate()});
      Tensor hook_grad;
      if (use == Use::kHook) {
        h.register_hook([&](const Tensor& g) {
          hook_grad = g.full_tensor();
          return Tensor();
        });
      }
      Tensor loss = sum(matmul(h, wd) * matmul(h, wd));
      if (use == Use::kTwoMatmuls) loss = loss + sum(matmul(h, wd * 3));
      if (use == Use::kPlusReplicate) loss = loss + sum(h * h);
      debug::CommDebugMode mode;
      loss.backward();
      const auto counts = mode.get_comm_counts();
      const bool partial = use == Use::kTwoMatmuls;
      if (partial ? counts != std::map<std::string, int64_t>{{"reduce_scatter_tensor", 1}}
                  : counts.count("all_reduce") != 1) {
        f.push_back("backward collectives:\n" + mode.tracing_table());
      }
      if (!allclose(xd.grad().full_tensor(), xr.grad(), 1e-12, 1e-12)) {
        f.push_back("x grad differs from one device's");
      }
      if (use == Use::kHook) {
        const Tensor h1 = x.clone().requires_grad_();
        Tensor h_grad;
        h1.register_hook([&](const Tensor& g) {
          h_grad = g.clone();
          return Tensor();
        });
        single(h1).backward();
        if (!hook_grad.defined() || !allclose(hook_grad, h_grad, 1e-12, 1e-12)) {
          f.push_back("the hook saw another gradient than one device's");
        }
      }
      return f;
    });
  }
}

}  // namespace
}  // namespace tessera::dtensor_test
