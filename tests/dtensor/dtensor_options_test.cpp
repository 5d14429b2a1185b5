// redistribute's options (async_op, forward_dtype, backward_dtype) and the grad_placements hints
// of from_local / to_local / full_tensor, with their collectives counted.

#include <catch2/catch.hpp>

#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {
namespace {

using dist::ReduceOp;

TEST_CASE("async redistribute completes on wait() or first use", "[dtensor][options]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const Tensor global = arange(32, kFloat32).reshape({8, 4});
    for (const Placements& src : std::vector<Placements>{{Shard(0)}, {Partial()}}) {
      const DTensor x = distribute_tensor(global, mesh, src);
      const DTensor y = x.redistribute({Replicate()}, {.async_op = true});
      if (!equal(y.wait().to_local(), global)) f.push_back(to_string(src) + ": wait()");
      const DTensor z = x.redistribute({Replicate()}, {.async_op = true});
      if (!equal(z.full_tensor(), global)) f.push_back(to_string(src) + ": first use");
    }
    return f;
  });
}

TEST_CASE("forward_dtype and backward_dtype", "[dtensor][options]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const Tensor global = arange(32, kFloat32).reshape({8, 4}) / 8.0;
    const DTensor x = distribute_tensor(global, mesh, {Shard(0)});
    x.requires_grad_();
    const DTensor y =
        x.redistribute({Replicate()}, {.forward_dtype = kBFloat16, .backward_dtype = kFloat64});
    if (y.dtype() != kBFloat16 || y.to_local().dtype() != kBFloat16) f.push_back("forward dtype");
    if (!equal(y.to_local(), global.to(kBFloat16))) f.push_back("forward values");
    const Tensor out = y.to_local();
    sum(out.to(kFloat32) * 3.0).backward();
    const DTensor g = x.grad();
    if (!g.defined() || g.dtype() != kFloat32) f.push_back("gradient dtype (the input's)");
    if (g.defined() && !equal(g.full_tensor(), full({8, 4}, 3.0))) f.push_back("gradient values");
    return f;
  });
}

struct HintCase {
  std::string name;
  int64_t backward_collectives;
  bool ok;
};

TEST_CASE("grad_placements hints: gradients and their collectives", "[dtensor][options]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const int64_t world = 4;
    const Tensor global = ones({8, 3});
    auto backward_count = [](const Tensor& local_out) {
      debug::CommDebugMode mode;
      local_out.backward(ones_like(local_out));
      return mode.get_total_counts();
    };
    {
      // S(0) -> R, then to_local with a Partial gradient hint: the gradient is the sum over the
      // ranks (world * ones), reduced where it enters (one all_reduce) and chunked back for free.
      const DTensor x = distribute_tensor(global, mesh, {Shard(0)});
      x.requires_grad_();
      const Tensor local =
          x.redistribute({Replicate()}).to_local({.grad_placements = Placements{Partial()}});
      const int64_t n = backward_count(local);
      if (n != 1) f.push_back(fmt::format("to_local P hint: {} backward collectives", n));
      if (!equal(x.grad().full_tensor(), full({8, 3}, static_cast<double>(world)))) {
        f.push_back("to_local P hint: gradient is not world * ones");
      }
    }
    {
      // full_tensor with a Partial hint on a S(0) input: gradient world * ones.
      const DTensor x = distribute_tensor(global, mesh, {Shard(0)});
      x.requires_grad_();
      const Tensor full_out = x.full_tensor({.grad_placements = Placements{Partial()}});
      backward_count(full_out);
      if (!equal(x.grad().full_tensor(), full({8, 3}, static_cast<double>(world)))) {
        f.push_back("full_tensor P hint: gradient is not world * ones");
      }
    }
    {
      // from_local(R) with a Partial gradient hint: the replicated gradient becomes a Partial(sum)
      // one locally (coordinate 0 keeps it, the others get zeros: exact), no collective.
      const Tensor local = ones({8, 3});
      local.requires_grad_();
      const DTensor x = DTensor::from_local(local, mesh, {Replicate()},
                                            {.grad_placements = Placements{Partial()}});
      const int64_t n = backward_count(x.to_local() * 2.0);
      const double expected = mesh.get_local_rank(0) == 0 ? 2.0 : 0.0;
      if (n != 0 || !equal(local.grad(), full({8, 3}, expected))) {
        f.push_back(fmt::format("from_local P hint: {} collectives", n));
      }
    }
    {
      // A hint that would change the local gradient's shape is refused.
      const Tensor local = ones({2, 3});
      try {
        DTensor::from_local(local, mesh, {Shard(0)}, {.grad_placements = Placements{Replicate()}});
        f.push_back("layout-changing hint: no Error");
      } catch (const Error& e) {
        if (std::string(e.what()).find("not its layout") == std::string::npos)
          f.push_back(e.what());
      }
    }
    {
      // Replicate -> to_local without hints: no collective in backward.
      const DTensor x = distribute_tensor(global, mesh, {Replicate()});
      x.requires_grad_();
      const int64_t n = backward_count(x.to_local());
      if (n != 0) f.push_back(fmt::format("R to_local: {} backward collectives", n));
    }
    return f;
  });
}

TEST_CASE("redistribute across meshes and to unsupported partials is refused",
          "[dtensor][options]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const DTensor x = distribute_tensor(ones({4}), mesh, {Shard(0)});
    try {
      x.redistribute({Partial(ReduceOp::BAnd)});
      f.push_back("P(band) from R: no Error");
    } catch (const Error& e) {
      if (std::string(e.what()).find("only sum, avg, min and max") == std::string::npos) {
        f.push_back(e.what());
      }
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
