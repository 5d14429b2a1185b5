// Ops on DTensors that cannot run raise a tessera::Error naming the op and the problem: plain
// tensors mixed with DTensors (outside an ImplicitReplicationGuard), DTensors on different
// meshes, bad user sharding rules, in-place ops whose result the written DTensor's placements
// cannot hold, and data_ptr / DTensor(plain). Plus register_sharding's positive case.

#include <catch2/catch.hpp>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

// Runs fn, which must not throw; returns whether it did not.
bool expect_ok(Failures& f, const std::string& what, const std::function<void()>& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    f.push_back(what + ": unexpected error: " + e.what());
    return false;
  }
}

// Restores an op's built-in rule when the test leaves its scope, however it leaves.
class ShardingRuleGuard {
 public:
  ShardingRuleGuard(std::string op, ShardingRuleFn rule) : op_(std::move(op)) {
    register_sharding(op_, std::move(rule));
  }
  ~ShardingRuleGuard() { unregister_sharding(op_); }
  ShardingRuleGuard(const ShardingRuleGuard&) = delete;
  ShardingRuleGuard& operator=(const ShardingRuleGuard&) = delete;

 private:
  std::string op_;
};

TEST_CASE("ops errors: a plain tensor mixed with a DTensor", "[dtensor][ops][errors]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 5}, 1), b = ints({8, 5}, 2);
    const DTensor d = distribute_tensor(a, mesh, {Shard(0)});
    expect_error(f, "add(DTensor, plain)", [&] { add(d, b); },
                 {"[add] argument 1 is a plain Tensor of shape [8, 5]", "argument 0 is a DTensor",
                  "ImplicitReplicationGuard"});
    expect_error(f, "mul(plain, DTensor)", [&] { mul(b, d); },
                 {"[mul] argument 0 is a plain Tensor", "argument 1 is a DTensor",
                  "ImplicitReplicationGuard"});
    expect_error(f, "mm(DTensor, plain)",
                 [&] {
                   mm(d, ints({5, 3}, 3));
                 },
                 {"[mm] argument 1 is a plain Tensor of shape [5, 3]", "ImplicitReplicationGuard"});
    // Inside the guard the plain tensor is Replicate.
    expect_ok(f, "add inside ImplicitReplicationGuard", [&] {
      const ImplicitReplicationGuard guard;
      const DTensor out = add(d, b);
      expect_equal(f, "add(S(0), plain) inside the guard", out.full_tensor(), add(a, b));
      const DTensor prod = mm(d, ints({5, 3}, 3));
      expect_equal(f, "mm(S(0), plain) inside the guard", prod.full_tensor(),
                   mm(a, ints({5, 3}, 3)));
    });
    if (ImplicitReplicationGuard::active()) f.push_back("the guard outlived its scope");
    // One-element plain tensors mix without the guard.
    expect_ok(f, "one-element plain tensors", [&] {
      const Tensor one = full({1}, 3.0, kFloat64);
      const Tensor zero_dim = scalar_tensor(2.0, kFloat64);
      const DTensor out = mul(add(d, one), zero_dim);
      expect_equal(f, "(S(0) + [1]) * 0-dim", out.full_tensor(), mul(add(a, one), zero_dim));
    });
    return f;
  });
}

TEST_CASE("ops errors: DTensors on two different meshes", "[dtensor][ops][errors]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const DeviceMesh square(DeviceType::CPU, {2, 2});
    const Tensor a = ints({8, 4}, 4);
    const DTensor x = distribute_tensor(a, mesh, {Shard(0)});
    const DTensor y = distribute_tensor(a, square, {Shard(0), Replicate()});
    expect_error(f, "add on two meshes", [&] { add(x, y); },
                 {"[add] arguments 0 and 1 are DTensors on different device meshes"});
    expect_error(f, "mm on two meshes", [&] { mm(x, y.t()); }, {"[mm]", "different device meshes"});
    return f;
  });
}

TEST_CASE("ops errors: register_sharding with a strategy of the wrong length",
          "[dtensor][ops][errors]") {
  // register_sharding is process-wide: register once, outside the rank threads.
  const ShardingRuleGuard rule("relu", [](const ShardingCall&) {
    return std::vector<ShardingStrategy>{{{Shard(0), Shard(0)}, {Shard(0)}}};
  });
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const DTensor d = distribute_tensor(ints({8, 4}, 5), mesh, {Shard(0)});
    expect_error(
        f, "relu with a 2-output strategy", [&] { relu(d); },
        {"[relu] the sharding rule returned a strategy with 1 input placements and 2 output "
         "placements",
         "1 tensor inputs and 1 outputs"});
    return f;
  });
}

TEST_CASE("ops errors: register_sharding of an op not in the registry", "[dtensor][ops][errors]") {
  const auto rule = [](const ShardingCall&) { return std::vector<ShardingStrategy>{}; };
  CHECK_THROWS_AS(register_sharding("no_such_op", rule), Error);
  CHECK_THROWS_WITH(register_sharding("no_such_op", rule),
                    Catch::Contains("[register_sharding] 'no_such_op' is not an op of the "
                                    "registry"));
  CHECK_THROWS_WITH(unregister_sharding("no_such_op"),
                    Catch::Contains("[unregister_sharding] 'no_such_op' is not an op"));
  CHECK_THROWS_WITH(register_sharding("relu", nullptr),
                    Catch::Contains("[register_sharding] empty rule for 'relu'"));
}

TEST_CASE("ops: register_sharding replaces a rule until unregister_sharding",
          "[dtensor][ops][errors]") {
  const Tensor a = ints({8, 4}, 6);
  const auto relu_placements = [&a]() {
    Placements got;
    on_mesh({4}, [&](const DeviceMesh& mesh) {
      Failures f;
      const DTensor out = relu(distribute_tensor(a, mesh, {Shard(0)}));
      expect_equal(f, "relu(S(0))", out.full_tensor(), relu(a));
      if (mesh.get_local_rank(0) == 0) got = out.placements();
      return f;
    });
    return got;
  };
  CHECK(relu_placements() == Placements{Shard(0)});
  {
    // No strategy: only the all-Replicate one the dispatcher always adds.
    const ShardingRuleGuard rule(
        "relu", [](const ShardingCall&) { return std::vector<ShardingStrategy>{}; });
    CHECK(relu_placements() == Placements{Replicate()});
  }
  CHECK(relu_placements() == Placements{Shard(0)});
}

TEST_CASE("ops errors: in-place ops keep the written DTensor's placements",
          "[dtensor][ops][errors]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 5}, 7), b = ints({8, 5}, 8);
    // R += S(0): the written tensor stays R, so the other is gathered (valid, no error).
    expect_ok(f, "R += S(0)", [&] {
      DTensor self = distribute_tensor(a, mesh, {Replicate()});
      const DTensor other = distribute_tensor(b, mesh, {Shard(0)});
      debug::CommDebugMode mode;
      self += other;
      if (mode.get_total_counts() != 1 || mode.count("all_gather_into_tensor") != 1) {
        f.push_back("R += S(0): expected one all_gather, got\n" + mode.tracing_table());
      }
      expect_placements(f, "R += S(0)", self, {Replicate()});
      expect_equal(f, "R += S(0)", self.full_tensor(), add(a, b));
    });
    // R += P(sum): the other is reduced (one all_reduce), the written tensor stays R.
    expect_ok(f, "R += P(sum)", [&] {
      DTensor self = distribute_tensor(a, mesh, {Replicate()});
      const DTensor other = distribute_tensor(b, mesh, {Partial()});
      self += other;
      expect_placements(f, "R += P(sum)", self, {Replicate()});
      expect_equal(f, "R += P(sum)", self.full_tensor(), add(a, b));
    });
    // fill_ keeps no P(sum) (every rank would hold the value: the sum would be 4x it).
    expect_error(f, "P(sum).fill_", [&] { distribute_tensor(a, mesh, {Partial()}).fill_(1.0); },
                 {"[fill_] writes its first argument in place", "P(sum)"});
    // P(sum) *= S(0): mul keeps P(sum) with a Replicate factor, so the factor is gathered (one
    // all_gather) and the written tensor stays P(sum) (valid, no error).
    expect_ok(f, "P(sum) *= S(0)", [&] {
      DTensor self = distribute_tensor(a, mesh, {Partial()});
      const DTensor other = distribute_tensor(b, mesh, {Shard(0)});
      debug::CommDebugMode mode;
      self *= other;
      if (mode.get_total_counts() != 1 || mode.count("all_gather_into_tensor") != 1) {
        f.push_back("P(sum) *= S(0): expected one all_gather, got\n" + mode.tracing_table());
      }
      expect_placements(f, "P(sum) *= S(0)", self, {Partial()});
      expect_equal(f, "P(sum) *= S(0)", self.full_tensor(), mul(a, b));
    });
    // P(sum) += 1: adding a scalar to each rank's partial value adds it once per rank; add keeps
    // P(avg/max/min) with a scalar, never P(sum).
    expect_error(f, "P(sum) += 1",
                 [&] {
                   DTensor self = distribute_tensor(a, mesh, {Partial()});
                   self += 1.0;
                 },
                 {"[add_.scalar] writes its first argument in place", "[P(sum)]"});
    // Broadcasting to a larger shape than the written tensor's is an error, as for plain tensors.
    expect_error(f, "plain [8] += [8, 8]",
                 [&] {
                   Tensor self = ints({8}, 9);
                   self += ints({8, 8}, 10);
                 },
                 {"[add_] output with shape [8] doesn't match the broadcast shape [8, 8]"});
    expect_error(f, "R [8] += R [8, 8]",
                 [&] {
                   DTensor self = distribute_tensor(ints({8}, 9), mesh, {Replicate()});
                   self += distribute_tensor(ints({8, 8}, 10), mesh, {Replicate()});
                 },
                 {"[add_] output with shape [8] doesn't match the broadcast shape [8, 8]"});
    // A sharded written tensor gets the same shape error (before any placement is chosen).
    expect_error(f, "S(0) [8] += R [8, 8]",
                 [&] {
                   DTensor self = distribute_tensor(ints({8}, 9), mesh, {Shard(0)});
                   self += distribute_tensor(ints({8, 8}, 10), mesh, {Replicate()});
                 },
                 {"[add_] output with shape [8] doesn't match the broadcast shape [8, 8]"});
    return f;
  });
}

TEST_CASE("ops errors: data_ptr of a DTensor, and DTensor of a plain tensor",
          "[dtensor][ops][errors]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 5}, 11);
    const DTensor d = distribute_tensor(a, mesh, {Shard(0)});
    expect_error(f, "data_ptr", [&] { (void)d.data_ptr<double>(); },
                 {"[data_ptr] a DTensor (shape [8, 5]) has no single data pointer"});
    expect_error(f, "raw_data", [&] { (void)d.raw_data(); }, {"[data_ptr] a DTensor"});
    expect_error(f, "DTensor(plain)", [&] { const DTensor bad(a); },
                 {"[DTensor] a plain tensor (shape [8, 5]) is not a DTensor"});
    // A DTensor made of an op's result is fine (an op on DTensors returns one).
    expect_ok(f, "DTensor(op result)", [&] {
      const DTensor twice = add(d, d);
      expect_placements(f, "add(S(0), S(0))", twice, {Shard(0)});
    });
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
