// Collectives per transition (CommDebugMode), forward and backward, against PyTorch's documented
// counts, and the cases where the planner beats PyTorch's per-dim order through flattened groups.

#include <catch2/catch.hpp>
#include <cmath>

#include "tessera/dtensor/debug/comm_debug_mode.h"
#include "tessera/dtensor/redistribute/cost_model.h"
#include "tessera/dtensor/redistribute/plan.h"
#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {
namespace {

using dist::ReduceOp;

struct Counts {
  int64_t forward = 0;
  int64_t backward = 0;
  std::map<std::string, int64_t> forward_kinds;
  std::map<std::string, int64_t> backward_kinds;
};

// Collectives of one redistribute, and of its backward (gradient of sum of the output).
Counts count_redistribute(const DeviceMesh& mesh, const Shape& shape, const Placements& src,
                          const Placements& dst) {
  Generator gen(7);
  const Tensor global = rand(shape, kFloat64, &gen);
  const DTensor x = distribute_tensor(global, mesh, src);
  x.requires_grad_();
  Counts c;
  DTensor y;
  {
    debug::CommDebugMode mode;
    y = x.redistribute(dst);
    c.forward = mode.get_total_counts();
    c.forward_kinds = mode.get_comm_counts();
  }
  const Tensor local = y.to_local();
  {
    debug::CommDebugMode mode;
    local.backward(ones_like(local));
    c.backward = mode.get_total_counts();
    c.backward_kinds = mode.get_comm_counts();
  }
  return c;
}

std::string kinds(const std::map<std::string, int64_t>& counts) {
  std::string s;
  for (const auto& [name, n] : counts) s += fmt::format(" {}x{}", n, name);
  return s;
}

std::string describe(const Counts& c) {
  return fmt::format("forward {}{}, backward {}{}", c.forward, kinds(c.forward_kinds), c.backward,
                     kinds(c.backward_kinds));
}

TEST_CASE("1-D transitions: forward and backward collectives as PyTorch's table",
          "[dtensor][planner]") {
  struct Case {
    Placement src;
    Placement dst;
    int64_t forward;
    const char* forward_kind;
    int64_t backward;
    const char* backward_kind;
  };
  const std::vector<Case> cases{
      {Shard(0), Replicate(), 1, "all_gather_into_tensor", 0, ""},
      {Replicate(), Shard(0), 0, "", 1, "all_gather_into_tensor"},
      {Partial(), Replicate(), 1, "all_reduce", 0, ""},
      {Partial(), Shard(0), 1, "reduce_scatter_tensor", 1, "all_gather_into_tensor"},
      {Shard(0), Shard(1), 1, "all_to_all_single", 1, "all_to_all_single"},
      {Replicate(), Replicate(), 0, "", 0, ""},
      {Partial(), Partial(), 0, "", 0, ""},
      {Replicate(), Partial(), 0, "", 0, ""},
  };
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    std::vector<std::string> failures;
    for (const Case& k : cases) {
      const Counts c = count_redistribute(mesh, {8, 8}, {k.src}, {k.dst});
      const bool ok = c.forward == k.forward && c.backward == k.backward &&
                      (k.forward == 0 || c.forward_kinds.count(k.forward_kind) == 1) &&
                      (k.backward == 0 || c.backward_kinds.count(k.backward_kind) == 1);
      if (!ok) {
        failures.push_back(
            fmt::format("{} -> {}: {}", k.src.to_string(), k.dst.to_string(), describe(c)));
      }
    }
    return failures;
  });
}

TEST_CASE("2-D and 3-D transitions: PyTorch's counts, fewer through flattened groups",
          "[dtensor][planner]") {
  struct Case {
    Placements src;
    Placements dst;
    Shape shape;
    int64_t torch_count;  // PyTorch's greedy order (test_redistribute.py)
    int64_t ours;         // with flattened-group merging
  };
  const std::vector<Case> two_d{
      {{Shard(0), Shard(1)}, {Shard(0), Shard(0)}, {8, 8}, 1, 1},
      {{Shard(0), Shard(1)}, {Shard(1), Shard(0)}, {8, 8}, 2, 2},
      // 256 bytes: one all_gather over the 4 ranks and local chunks beat all_gather + all_to_all.
      {{Shard(0), Shard(0)}, {Shard(1), Shard(1)}, {8, 8}, 2, 1},
      {{Shard(0), Shard(2)}, {Shard(1), Shard(0)}, {8, 8, 8}, 2, 2},
      {{Shard(1), Shard(1)}, {Shard(1), Shard(2)}, {8, 8, 8}, 1, 1},
      // The planner beats the per-dim order: one all_gather over the 4 ranks.
      {{Shard(0), Shard(0)}, {Replicate(), Replicate()}, {8, 8}, 2, 1},
      {{Shard(0), Shard(0)}, {Replicate(), Shard(0)}, {8, 8}, 2, 1},
      // ... and one all_reduce / reduce_scatter over the flattened group.
      {{Partial(), Partial()}, {Replicate(), Replicate()}, {8, 8}, 2, 1},
      {{Partial(), Partial()}, {Shard(0), Shard(0)}, {8, 8}, 2, 1},
      {{Partial(), Partial()}, {Shard(0), Shard(1)}, {8, 8}, 2, 2},
  };
  const std::vector<Case> three_d{
      // 2 KiB: latency-bound, so one all_gather over the 8 ranks and local chunks beat PyTorch's
      // all_gather + all_gather + all_to_all.
      {{Shard(0), Shard(0), Shard(0)}, {Shard(1), Shard(1), Shard(1)}, {8, 8, 8}, 3, 1},
      {{Shard(0), Shard(1), Shard(2)}, {Shard(2), Shard(1), Shard(0)}, {8, 8, 8}, 2, 2},
      {{Shard(1), Shard(0), Shard(0)}, {Replicate(), Shard(0), Shard(0)}, {8, 8, 8}, 1, 1},
      {{Shard(1), Replicate(), Shard(0)}, {Replicate(), Shard(0), Shard(0)}, {8, 8, 8}, 2, 2},
      {{Partial(), Partial(), Partial()}, {Replicate(), Replicate(), Replicate()}, {8, 8, 8}, 3, 1},
  };
  auto run = [](const Shape& mesh_shape, const std::vector<Case>& cases) {
    on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
      std::vector<std::string> failures;
      for (const Case& k : cases) {
        const Counts c = count_redistribute(mesh, k.shape, k.src, k.dst);
        if (c.forward != k.ours) {
          failures.push_back(fmt::format("{} -> {}: expected {} collectives (PyTorch: {}), {}",
                                         to_string(k.src), to_string(k.dst), k.ours, k.torch_count,
                                         describe(c)));
        }
      }
      return failures;
    });
  };
  run({2, 2}, two_d);
  run({2, 2, 2}, three_d);
}

TEST_CASE("sub-meshes: flattened groups only over contiguous parent dims", "[dtensor][planner]") {
  on_mesh({2, 2, 2},
          [](const DeviceMesh& mesh) {
            std::vector<std::string> failures;
            const Tensor global = arange(64, kFloat32).reshape({8, 8});
            // Same sub-mesh shape, different groups: the plan cache must tell them apart.
            for (const auto& [names, expected] :
                 std::vector<std::pair<std::vector<std::string>, int64_t>>{
                     {{"a", "b"}, 1}, {{"a", "c"}, 2}, {{"b", "c"}, 1}}) {
              const DeviceMesh sub = mesh[names];
              const DTensor x = distribute_tensor(global, sub, {Shard(0), Shard(0)});
              debug::CommDebugMode mode;
              const DTensor y = x.redistribute({Replicate(), Replicate()});
              if (mode.get_total_counts() != expected || !equal(y.to_local(), global)) {
                failures.push_back(fmt::format("sub-mesh {}{}: {} collectives", names[0], names[1],
                                               mode.get_total_counts()));
              }
            }
            return failures;
          },
          {"a", "b", "c"});
}

TEST_CASE("plans are cached and cheap to look up", "[dtensor][planner]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    std::vector<std::string> failures;
    const DTensorSpec spec{mesh, {Shard(0), Shard(1)}, {64, 64}, {64, 1}, kFloat32};
    const dtensor::RedistributePlan& a = dtensor::plan_redistribute(spec, {Shard(1), Shard(0)});
    const dtensor::RedistributePlan& b = dtensor::plan_redistribute(spec, {Shard(1), Shard(0)});
    if (&a != &b) failures.push_back("the second lookup made a new plan");
    if (a.steps.empty()) failures.push_back("empty plan for a real transition");
    // Bandwidth-bound (16 MiB): PyTorch's all_gather + all_to_all moves less than gathering all.
    const DTensorSpec big{mesh, {Shard(0), Shard(0)}, {2048, 2048}, {2048, 1}, kFloat32};
    const dtensor::RedistributePlan& p = dtensor::plan_redistribute(big, {Shard(1), Shard(1)});
    int64_t collectives = 0;
    for (const auto& step : p.steps) {
      collectives += step.kind != dtensor::StepKind::Chunk ? 1 : 0;
    }
    if (collectives != 2) failures.push_back("16 MiB [S0,S0]->[S1,S1]:\n" + p.to_string());
    return failures;
  });
}

// Installs a cost model for a scope (process-wide) and puts the previous one back.
class CostModelScope {
 public:
  explicit CostModelScope(const dtensor::CostModel& model) : saved_(dtensor::cost_model()) {
    dtensor::set_cost_model(model);
  }
  ~CostModelScope() { dtensor::set_cost_model(saved_); }
  CostModelScope(const CostModelScope&) = delete;
  CostModelScope& operator=(const CostModelScope&) = delete;

 private:
  dtensor::CostModel saved_;
};

TEST_CASE("measured collective lines price the plans and change the choice", "[dtensor][planner]") {
  // tessera-shardbench installs its calibration this way: a line per collective and group size.
  dtensor::CostModel model;
  model.set_line("all_gather_into_tensor", 2, {1e-6, 1e-10});
  model.set_line("all_gather_into_tensor", 4, {1.0, 0.0});  // the flattened group: very slow
  {
    const CostModelScope scope(model);
    on_mesh({2, 2}, [](const DeviceMesh& mesh) {
      std::vector<std::string> failures;
      const DTensorSpec spec{mesh, {Shard(0), Shard(0)}, {8, 8}, {8, 1}, kFloat32};
      const dtensor::RedistributePlan& p =
          dtensor::plan_redistribute(spec, {Replicate(), Replicate()});
      // Two all_gathers over 2 ranks, each priced by its line on its whole (gathered) message.
      const double expected = (1e-6 + 1e-10 * 128) + (1e-6 + 1e-10 * 256);
      if (p.steps.size() != 2 || std::abs(p.cost_s - expected) > 1e-12) {
        failures.push_back(
            fmt::format("expected two all_gathers costing {} s:\n{}", expected, p.to_string()));
      }
      const DTensor x =
          distribute_tensor(arange(64, kFloat32).reshape({8, 8}), mesh, {Shard(0), Shard(0)});
      debug::CommDebugMode mode;
      const DTensor y = x.redistribute({Replicate(), Replicate()});
      if (mode.get_total_counts() != 2) failures.push_back("the redistribute did not follow it");
      return failures;
    });
  }
  // The default model again: one all_gather over the flattened group (plans made anew).
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    const DTensorSpec spec{mesh, {Shard(0), Shard(0)}, {8, 8}, {8, 1}, kFloat32};
    const auto& p = dtensor::plan_redistribute(spec, {Replicate(), Replicate()});
    return p.steps.size() == 1 ? std::vector<std::string>{}
                               : std::vector<std::string>{"default model:\n" + p.to_string()};
  });
  // Without a line the link formula prices: call + alpha (n - 1) rounds + beta on the wire.
  dtensor::CostModel links;
  links.call_s = 1e-6;
  links.fallback = {2e-6, 1e-9};
  CHECK(links.seconds("all_reduce", 4, 1, 1000) == Approx(1e-6 + 2e-6 * 3 * 2 + 1e-9 * 1500));
  CHECK(links.seconds("all_gather_into_tensor", 4, 2, 1000) ==
        Approx(2 * (1e-6 + 2e-6 * 3) + 1e-9 * 750));
  links.set_line("all_reduce", 4, {1e-3, 0.0});
  CHECK(links.seconds("all_reduce", 4, 3, 1000) == Approx(3e-3));
  CHECK(links.line("all_reduce", 2) == nullptr);
}

}  // namespace
}  // namespace tessera::dtensor_test
