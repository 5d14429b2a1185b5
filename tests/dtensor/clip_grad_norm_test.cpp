// clip_grad_norm_ over parameters that are DTensors (tensor-parallel, fully sharded, replicated)
// beside plain ones: the total is the norm of the whole gradients, as one device computes it,
// and every shard is scaled by the same factor.

#include <catch2/catch.hpp>
#include <cmath>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

void expect_close(Failures& f, const std::string& what, const Tensor& got, const Tensor& want) {
  if (!allclose(got, want, 1e-12, 1e-12)) {
    f.push_back(fmt::format("{}: {} where one device has {}", what, got, want));
  }
}

TEST_CASE("clip_grad_norm_ over DTensor gradients: the global norm, every shard scaled alike",
          "[dtensor][optim]") {
  const Tensor wa = ints({5, 3}, 1), ga = ints({5, 3}, 2);  // 5 rows: uneven over 2
  const Tensor wb = ints({4}, 3), gb = ints({4}, 4);
  const Tensor wc = ints({2}, 5), gc = ints({2}, 6);
  for (const double norm_type : {2.0, 1.0, static_cast<double>(INFINITY)}) {
    INFO("norm_type " << norm_type);
    // One device: the reference.
    Tensor a = wa.clone().requires_grad_(), b = wb.clone().requires_grad_();
    Tensor c = wc.clone().requires_grad_();
    a.set_grad(ga.clone());
    b.set_grad(gb.clone());
    c.set_grad(gc.clone());
    const Tensor total = nn::clip_grad_norm_({a, b, c}, 1.5, norm_type);
    REQUIRE(total.item<double>() > 1.5);  // it clips
    on_mesh({2, 2}, [&](const DeviceMesh& mesh) {
      Failures f;
      Tensor da = distribute_tensor(wa, mesh, {Shard(0), Shard(1)}).requires_grad_();
      Tensor db = distribute_tensor(wb, mesh, {Replicate(), Shard(0)}).requires_grad_();
      Tensor dc = wc.clone().requires_grad_();  // a plain parameter beside them
      da.set_grad(distribute_tensor(ga, mesh, {Shard(0), Shard(1)}));
      db.set_grad(distribute_tensor(gb, mesh, {Replicate(), Shard(0)}));
      dc.set_grad(gc.clone());
      const Tensor got = nn::clip_grad_norm_({da, db, dc}, 1.5, norm_type);
      const Tensor whole = got.is_distributed() ? got.full_tensor() : got;
      if (std::abs(whole.item<double>() - total.item<double>()) > 1e-12) {
        f.push_back(fmt::format("total {} where one device has {}", whole.item<double>(),
                                total.item<double>()));
      }
      expect_close(f, "a's gradient", da.grad().full_tensor(), a.grad());
      expect_close(f, "b's gradient", db.grad().full_tensor(), b.grad());
      expect_close(f, "c's gradient", dc.grad(), c.grad());
      return f;
    });
  }
}

TEST_CASE("clip_grad_norm_ over gradients on a 2-D mesh and its sub-mesh (FSDP x TP)",
          "[dtensor][optim]") {
  const Tensor wa = ints({4, 6}, 7), ga = ints({4, 6}, 8);
  const Tensor wb = ints({6}, 9), gb = ints({6}, 10);
  Tensor a = wa.clone().requires_grad_(), b = wb.clone().requires_grad_();
  a.set_grad(ga.clone());
  b.set_grad(gb.clone());
  const Tensor total = nn::clip_grad_norm_({a, b}, 1.5);
  on_mesh(
      {2, 2},
      [&](const DeviceMesh& mesh) {
        Failures f;
        // A tensor-parallel parameter on the 2-D mesh, a norm's on the "dp" sub-mesh.
        Tensor da = distribute_tensor(wa, mesh, {Shard(0), Shard(1)}).requires_grad_();
        Tensor db = distribute_tensor(wb, mesh["dp"], {Shard(0)}).requires_grad_();
        da.set_grad(distribute_tensor(ga, mesh, {Shard(0), Shard(1)}));
        db.set_grad(distribute_tensor(gb, mesh["dp"], {Shard(0)}));
        const Tensor got = nn::clip_grad_norm_({da, db}, 1.5);
        if (got.is_distributed() || std::abs(got.item<double>() - total.item<double>()) > 1e-12) {
          f.push_back(fmt::format("total {} where one device has {}", got, total));
        }
        expect_close(f, "a's gradient", da.grad().full_tensor(), a.grad());
        expect_close(f, "b's gradient", db.grad().full_tensor(), b.grad());
        return f;
      },
      {"dp", "tp"});
}

}  // namespace
}  // namespace tessera::dtensor_test
