// Gradients through redistribute: for every ordered pair of placement lists, the gradient of
// sum(w * redistribute(x).full_tensor()) with respect to the source equals the single-device
// gradient w, with the placements of PyTorch's rules (the source's, Partial -> Replicate); and
// second derivatives through chains of redistributes equal the single-device ones.

#include <catch2/catch.hpp>

#include "tessera/autograd/autograd.h"
#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

std::vector<std::string> check_gradients(const DeviceMesh& mesh, const std::vector<Shape>& shapes,
                                         int64_t* pairs_checked) {
  std::vector<std::string> failures;
  for (const Shape& shape : shapes) {
    const Tensor ref = reference(shape);
    const Tensor w = reference(shape) * 3.0 + 1.0;
    const auto lists = all_placement_lists(mesh.ndim(), static_cast<int64_t>(shape.size()));
    for (const Placements& src : lists) {
      for (const Placements& dst : lists) {
        const std::string what =
            fmt::format("shape {} {} -> {}", shape, to_string(src), to_string(dst));
        try {
          const Tensor local = make_local(ref, mesh, src);
          local.requires_grad_();
          const DTensor x = DTensor::from_local(
              local, mesh, src, {.shape = shape, .stride = contiguous_strides(shape)});
          sum(w * x.redistribute(dst).full_tensor()).backward();
          // The leaf's gradient is w laid out as the source, Partial -> Replicate.
          const DTensor grad(local.grad(), std::make_shared<DTensorSpec>(DTensorSpec{
                                               mesh, dtensor::normalize_for_grad(src), shape,
                                               contiguous_strides(shape), kFloat64}));
          if (!equal(grad.full_tensor(), w)) failures.push_back(what + ": gradient differs from w");
        } catch (const std::exception& e) {
          failures.push_back(what + ": " + e.what());
        }
        ++*pairs_checked;
        if (failures.size() > 20) return failures;
      }
    }
  }
  return failures;
}

void run_gradients(const Shape& mesh_shape, const std::vector<Shape>& shapes) {
  int64_t pairs = 0;
  on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
    int64_t mine = 0;
    auto failures = check_gradients(mesh, shapes, &mine);
    if (first_rank_of(mesh)) pairs = mine;
    return failures;
  });
  INFO("mesh " << mesh_shape << ": " << pairs << " ordered pairs");
  CHECK(pairs > 0);
}

TEST_CASE("redistribute gradients: mesh 4", "[dtensor][redistribute][grad]") {
  run_gradients({4}, {{7}, {5, 3}});
}
TEST_CASE("redistribute gradients: mesh 2x2", "[dtensor][redistribute][grad]") {
  run_gradients({2, 2}, {{7}, {5, 3}});
}
TEST_CASE("redistribute gradients: mesh 2x3", "[dtensor][redistribute][grad]") {
  run_gradients({2, 3}, {{5, 3}});
}

TEST_CASE("a leaf DTensor's grad() is a DTensor with the rule's placements", "[dtensor][grad]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    std::vector<std::string> failures;
    const Tensor w = reference({6, 4});
    for (const Placements& src : std::vector<Placements>{
             {Shard(0), Shard(1)}, {Partial(), Shard(0)}, {Replicate(), Partial(ReduceOp::Avg)}}) {
      const DTensor x = distribute_tensor(reference({6, 4}), mesh, src);
      x.requires_grad_();
      sum(w * x.redistribute({Replicate(), Replicate()}).full_tensor()).backward();
      const DTensor g = x.grad();
      if (g.placements() != dtensor::normalize_for_grad(src)) {
        failures.push_back(to_string(src) + ": grad placements " + to_string(g.placements()));
      }
      if (!equal(g.full_tensor(), w)) failures.push_back(to_string(src) + ": grad differs from w");
    }
    return failures;
  });
}

TEST_CASE("second derivatives through chains of redistributes", "[dtensor][grad]") {
  // z = sum(w * y * y) with y the chain's full tensor: dz/dx = 2 w x, and the gradient of
  // sum(v * dz/dx) is 2 w v, computed through the recorded backward of every redistribute.
  const std::vector<std::vector<Placements>> chains{
      {{Shard(0)}, {Shard(1)}, {Replicate()}},
      {{Partial()}, {Shard(0)}, {Replicate()}},
      {{Replicate()}, {Partial()}, {Shard(1)}},
      {{Shard(1)}, {Partial(ReduceOp::Avg)}, {Shard(0)}},
  };
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    std::vector<std::string> failures;
    const Shape shape{6, 5};
    const Tensor w = reference(shape);
    const Tensor v = reference(shape) + 2.0;
    for (const auto& chain : chains) {
      const DTensor x = distribute_tensor(reference(shape), mesh, chain[0]);
      x.requires_grad_();
      DTensor y = x;
      for (size_t i = 1; i < chain.size(); ++i) y = y.redistribute(chain[i]);
      const Tensor full = y.full_tensor();
      const Tensor z = sum(w * full * full);
      const Tensor g = autograd::grad({z}, {x.unsafe_local()}, {}, {.create_graph = true})[0];
      const DTensor gd(g, std::make_shared<DTensorSpec>(
                              DTensorSpec{mesh, dtensor::normalize_for_grad(chain[0]), shape,
                                          contiguous_strides(shape), kFloat64}));
      const Tensor g_full = gd.full_tensor();
      if (!allclose(g_full, reference(shape) * w * 2.0)) {
        failures.push_back(to_string(chain[0]) + " chain: first derivative differs");
      }
      sum(v * g_full).backward();
      const DTensor gg(x.unsafe_local().grad(), std::make_shared<DTensorSpec>(DTensorSpec{
                                                    mesh, dtensor::normalize_for_grad(chain[0]),
                                                    shape, contiguous_strides(shape), kFloat64}));
      if (!allclose(gg.full_tensor(), v * w * 2.0)) {
        failures.push_back(to_string(chain[0]) + " chain: second derivative differs");
      }
    }
    return failures;
  });
}

TEST_CASE("gradgradcheck through chains of redistributes", "[dtensor][grad]") {
  // The input is replicated and identical on every rank, so each rank's finite differences
  // (all ranks perturb the same element in step) measure the derivative with respect to the
  // global tensor, which is what the local gradient of a Replicate input holds.
  const std::vector<std::vector<Placements>> chains{
      {{Shard(0)}, {Shard(1)}},
      {{Partial()}, {Shard(0)}},
      {{Shard(1)}, {Partial(ReduceOp::Avg)}, {Shard(0)}},
      {{Partial(ReduceOp::Max)}, {Shard(1)}},
  };
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    std::vector<std::string> failures;
    Generator gen(5);
    const Tensor w = rand({4, 3}, kFloat64, &gen);
    for (const auto& chain : chains) {
      auto fn = [&](const std::vector<Tensor>& in) {
        DTensor y = DTensor::from_local(in[0], mesh, {Replicate()});
        for (const Placements& p : chain) y = y.redistribute(p);
        const Tensor full = y.full_tensor();
        return full * full * w;
      };
      Tensor x = rand({4, 3}, kFloat64, &gen);
      x.requires_grad_();
      try {
        autograd::gradcheck(fn, {x});
        autograd::gradgradcheck(fn, {x});
      } catch (const std::exception& e) {
        failures.push_back(to_string(chain[0]) + " chain: " + e.what());
      }
    }
    return failures;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
