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

// Note [One gather for inputs the styles share]: two Colwise modules reading one sequence-sharded
// input gather it once and reduce_scatter its summed gradient once, in every step; the sharing
// never reaches into a later step (whose backward would otherwise meet a graph already run).
TEST_CASE("styles share one gather of a common input, within a step only",
          "[dtensor][redistribute][grad]") {
  class TwoHeads : public nn::Module {
   public:
    TwoHeads() : Module("TwoHeads") {
      manual_seed(3);
      a_ = register_module("a", std::make_shared<nn::Linear>(6, 8, true, kFloat64));
      b_ = register_module("b", std::make_shared<nn::Linear>(6, 8, true, kFloat64));
    }
    Tensor forward(const Tensor& x) override { return (*a_)(x) * (*b_)(x); }

   private:
    std::shared_ptr<nn::Linear> a_, b_;
  };
  const Tensor x = ints({8, 6}, 4) / 10;
  TwoHeads reference;
  const Tensor xr = x.clone().requires_grad_();
  std::vector<Tensor> want;
  for (int step = 0; step < 2; ++step) {
    sum((reference)(xr)).backward();
    want.push_back(xr.grad().clone());
  }
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    TwoHeads model;
    const ColwiseParallel colwise{.input_layouts = Shard(0), .use_local_output = false};
    parallelize_module(model, mesh, {{"a", colwise}, {"b", colwise}});
    const Tensor xd = distribute_tensor(x, mesh, {Shard(0)}).requires_grad_();
    for (int step = 0; step < 2; ++step) {
      debug::CommDebugMode mode;
      const Tensor y = model(xd);
      const auto forward = mode.get_comm_counts();
      sum(y).backward();
      const auto all = mode.get_comm_counts();
      if (forward != std::map<std::string, int64_t>{{"all_gather_into_tensor", 1}} ||
          all.at("reduce_scatter_tensor") != 1) {
        f.push_back("step " + std::to_string(step) + " collectives:\n" + mode.tracing_table());
      }
      if (!allclose(xd.grad().full_tensor(), want[static_cast<size_t>(step)], 1e-12, 1e-12)) {
        f.push_back("step " + std::to_string(step) + ": x grad differs from one device's");
      }
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
