// Random ops on DTensors (Note [Random ops on distributed tensors] in runtime/ops/random.cpp):
// for every placement list, full_tensor() of the op equals the single-device op on the global
// tensor after the same manual_seed, bitwise, a second draw matches the single-device second
// draw (the generator advanced alike on every rank), and the generator ends where the
// single-device one does. Then a training step with dropout gives the single-device loss and
// gradient.

#include <catch2/catch.hpp>
#include <functional>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

using RandomOp = std::function<Tensor(const Tensor&)>;

struct NamedOp {
  std::string name;
  RandomOp op;
};

std::vector<NamedOp> random_ops() {
  return {
      {"rand_like", [](const Tensor& x) { return rand_like(x); }},
      {"randn_like", [](const Tensor& x) { return randn_like(x); }},
      {"dropout(p=0.3)", [](const Tensor& x) { return dropout(x, 0.3); }},
      {"dropout(p=1)", [](const Tensor& x) { return dropout(x, 1.0); }},
      {"nn::Dropout(0.5)", [](const Tensor& x) { return nn::Dropout(0.5).forward(x); }},
  };
}

const std::vector<uint64_t> kSeeds{1, 2024};

// Checks every random op and dtype for one placement list on `mesh`: the global [7, 5] tensor
// is uneven on 2, 3 and 4 ranks along both dims.
Failures check_placements(const DeviceMesh& mesh, const Placements& ps) {
  Failures f;
  const Shape shape{7, 5};
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor full = (ints(shape, 3) + 0.5).to(dtype);
    const DTensor x = distribute_tensor(full, mesh, ps);
    for (const NamedOp& o : random_ops()) {
      for (uint64_t seed : kSeeds) {
        const std::string what = o.name + " " + fmt::format("{}", dtype) + " " + to_string(ps) +
                                 " seed " + std::to_string(seed);
        manual_seed(seed);
        const Tensor want1 = o.op(full);
        const Tensor want2 = o.op(full);
        const uint64_t want_offset = default_generator().offset();
        manual_seed(seed);
        const Tensor got1 = o.op(x);
        const Tensor got2 = o.op(x);
        if (!got1.is_distributed()) {
          f.push_back(what + ": the result is not a DTensor");
          continue;
        }
        expect_equal(f, what + " (first draw)", got1.full_tensor(), want1);
        expect_equal(f, what + " (second draw)", got2.full_tensor(), want2);
        if (default_generator().offset() != want_offset) {
          f.push_back(what + ": the generator is at offset " +
                      std::to_string(default_generator().offset()) + ", the single-device op " +
                      "leaves it at " + std::to_string(want_offset));
        }
      }
    }
  }
  return f;
}

TEST_CASE("random ops on DTensors draw the single-device values for every placement",
          "[dtensor][ops][random]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    for (const Placements& ps : std::vector<Placements>{{Replicate()}, {Shard(0)}, {Shard(1)}}) {
      const Failures more = check_placements(mesh, ps);
      f.insert(f.end(), more.begin(), more.end());
    }
    return f;
  });
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    for (const Placements& ps : std::vector<Placements>{{Shard(0), Shard(1)},
                                                        {Shard(1), Shard(0)},
                                                        {StridedShard(0, 2), Shard(0)},
                                                        {Shard(0), Shard(0)},
                                                        {Replicate(), Shard(1)}}) {
      const Failures more = check_placements(mesh, ps);
      f.insert(f.end(), more.begin(), more.end());
    }
    return f;
  });
}

TEST_CASE("dropout of a Partial DTensor reduces it first and draws the single-device mask",
          "[dtensor][ops][random]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor full = ints({6, 3}, 5);
    const DTensor whole = distribute_tensor(full, mesh);
    const DTensor partial = whole.redistribute({Partial()});
    manual_seed(3);
    const Tensor want = dropout(full, 0.4);
    manual_seed(3);
    const DTensor got(dropout(partial, 0.4));
    expect_equal(f, "dropout of P(sum)", got.full_tensor(), want);
    if (got.placements()[0].is_partial()) f.push_back("dropout kept a Partial placement");
    return f;
  });
}

// y = dropout(x @ w1) @ w2, loss = sum(y * y): x batch-sharded and w1 / w2 column / row
// sharded (the tensor-parallel MLP), against one device. The dropout mask is drawn on the
// hidden activations, sharded on their batch or hidden dim.
TEST_CASE("a training step with dropout gives the single-device loss and gradients",
          "[dtensor][ops][random]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor x = ints({6, 4}, 1);
    const Tensor w1 = ints({4, 10}, 2);
    const Tensor w2 = ints({10, 3}, 3);
    auto step = [](const Tensor& xi, const Tensor& a, const Tensor& b) {
      manual_seed(42);
      const Tensor y = matmul(dropout(matmul(xi, a), 0.5), b);
      const Tensor loss = sum(y * y);
      loss.backward();
      return loss;
    };
    const Tensor a = w1.clone().requires_grad_();
    const Tensor b = w2.clone().requires_grad_();
    const Tensor want = step(x, a, b);
    const DTensor da = distribute_tensor(w1, mesh, {Replicate(), Shard(1)});
    const DTensor db = distribute_tensor(w2, mesh, {Replicate(), Shard(0)});
    da.requires_grad_();
    db.requires_grad_();
    const DTensor dx = distribute_tensor(x, mesh, {Shard(0), Replicate()});
    const Tensor got = step(dx, da, db);
    // Integer inputs and a mask of 0 and 2: every sum is exact in float64.
    expect_equal(f, "loss", got.full_tensor(), want);
    expect_equal(f, "grad w1", da.grad().full_tensor(), a.grad());
    expect_equal(f, "grad w2", db.grad().full_tensor(), b.grad());
    return f;
  });
}

// torch's test_deterministic_dropout_1d: ranks seeded differently (manual_seed(100 + rank)) draw
// rank 0's values on a Replicate DTensor (Note [Generators agree across a mesh]), with one
// broadcast after the seeding and none on later draws; a 2-D mesh agrees with its first rank.
TEST_CASE("random ops on DTensors agree with the mesh's first rank when ranks seed differently",
          "[dtensor][random]") {
  const Tensor x = ints({6, 5}, 7) / 10 + 1;
  for (const Shape& mesh_shape : {Shape{4}, Shape{2, 2}}) {
    INFO("mesh " << mesh_shape);
    on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
      Failures f;
      manual_seed(100);
      const Tensor want1 = dropout(x, 0.4);
      const Tensor want2 = rand_like(x);
      const Tensor want_randn = randn({6, 5});
      const int64_t rank = dist::world()->rank();
      manual_seed(100 + static_cast<uint64_t>(rank));
      const Tensor d = distribute_tensor(x, mesh, Placements(mesh.ndim(), Replicate()));
      debug::CommDebugMode mode;
      const Tensor got1 = dropout(d, 0.4);
      const auto first = mode.get_comm_counts();
      const Tensor got2 = rand_like(d);
      const auto after = mode.get_comm_counts();
      if (first != std::map<std::string, int64_t>{{"broadcast", 1}} || after != first) {
        f.push_back("collectives:\n" + mode.tracing_table());
      }
      if (!equal(DTensor(got1).to_local(), want1)) f.push_back("dropout is not rank 0's");
      if (!equal(DTensor(got2).to_local(), want2)) f.push_back("rand_like is not rank 0's");
      manual_seed(100 + static_cast<uint64_t>(rank));
      (void)dropout(d, 0.4);
      (void)rand_like(d);
      // A factory after a fresh seeding agrees again (rank 0's third draw).
      const Tensor got3 =
          dtensor::randn({6, 5}, {.mesh = mesh, .placements = Placements(mesh.ndim(), Shard(0))});
      if (!equal(got3.full_tensor(), want_randn)) f.push_back("dtensor::randn is not rank 0's");
      return f;
    });
  }
}

}  // namespace
}  // namespace tessera::dtensor_test
