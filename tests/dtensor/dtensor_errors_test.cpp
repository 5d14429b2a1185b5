// Bad placements, meshes and local shards raise tessera::Error naming the op and what is valid.

#include <catch2/catch.hpp>

#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {
namespace {

using dist::ReduceOp;

// Runs f, expecting an Error whose message contains `needle`; returns a failure otherwise.
std::vector<std::string> expect_error(const std::string& what, const std::function<void()>& f,
                                      const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    if (std::string(e.what()).find(needle) == std::string::npos) {
      return {what + ": message lacks \"" + needle + "\": " + e.what()};
    }
    return {};
  }
  return {what + ": no Error"};
}

TEST_CASE("placement errors", "[dtensor][errors]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const Tensor t = ones({4, 4});
    auto add = [&](std::vector<std::string> more) { f.insert(f.end(), more.begin(), more.end()); };
    add(expect_error(
        "wrong count", [&] { distribute_tensor(t, mesh, {Shard(0)}); },
        "[distribute_tensor] got 1 placements [S(0)] for a 2-D mesh"));
    add(expect_error(
        "dim out of range",
        [&] {
          distribute_tensor(t, mesh, {Shard(2), Replicate()});
        },
        "out of range for a tensor of 2 dims"));
    add(expect_error(
        "mixed partials",
        [&] {
          DTensor::from_local(t, mesh, {Partial(ReduceOp::Sum), Partial(ReduceOp::Max)});
        },
        "mixed Partial reduce types"));
    const DTensor x = distribute_tensor(t, mesh, {Shard(0), Replicate()});
    add(expect_error(
        "redistribute count", [&] { x.redistribute({Replicate()}); },
        "[DTensor.redistribute] got 1 placements"));
    add(expect_error(
        "product partial from replicate",
        [&] {
          x.redistribute({Replicate(), Partial(ReduceOp::Product)});
        },
        "only sum, avg, min and max partials"));
    add(expect_error(
        "shape without stride",
        [&] {
          DTensor::from_local(t, mesh, {Shard(0), Replicate()}, {.shape = Shape{8, 4}});
        },
        "please pass both shape and stride"));
    add(expect_error(
        "local shard of the wrong shape",
        [&] {
          DTensor::from_local(t, mesh, {Shard(0), Replicate()},
                              {.shape = Shape{4, 4}, .stride = Shape{4, 1}});
        },
        "is not this rank's shard of global shape [4, 4]"));
    add(expect_error(
        "unknown mesh dim name", [&] { mesh["tp"]; }, "no mesh dim named \"tp\""));
    return f;
  });
}

TEST_CASE("run_check catches ranks that disagree, and mismatched meshes are refused",
          "[dtensor][errors]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const int64_t rank = mesh.get_local_rank(0);
    const Tensor local = ones({4, 4}, rank == 2 ? kFloat64 : kFloat32);
    auto more = expect_error(
        "inconsistent dtype",
        [&] { DTensor::from_local(local, mesh, {Shard(0)}, {.run_check = true}); },
        "inconsistent tensor metadata across ranks");
    f.insert(f.end(), more.begin(), more.end());
    return f;
  });
  // Two meshes of different shapes over the same 4 ranks.
  on_mesh({4}, [](const DeviceMesh& mesh) {
    const DeviceMesh other(DeviceType::CPU, {2, 2});
    const DTensor x = distribute_tensor(ones({4}), mesh, {Shard(0)});
    return expect_error(
        "other mesh",
        [&] {
          x.redistribute(other, {Replicate(), Replicate()});
        },
        "cross-mesh redistribute is not supported");
  });
}

TEST_CASE("init_device_mesh errors", "[dtensor][errors]") {
  on_mesh({2}, [](const DeviceMesh&) {
    std::vector<std::string> f;
    auto more = expect_error(
        "size", [] { init_device_mesh(DeviceType::CPU, {3}); }, "has 3 ranks but the world has 2");
    f.insert(f.end(), more.begin(), more.end());
    more = expect_error(
        "names",
        [] {
          init_device_mesh(DeviceType::CPU, {2}, {"a", "b"});
        },
        "got 2 mesh_dim_names for a mesh of shape [2]");
    f.insert(f.end(), more.begin(), more.end());
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
