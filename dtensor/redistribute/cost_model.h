#pragma once
// The alpha-beta cost model the redistribute planner ranks plans with: a collective over a group
// of N ranks costs
//
//   call_s + alpha_s * (N - 1) * rounds + beta_s_per_byte * bytes on the wire per rank
//
// where rounds is 2 for all_reduce (reduce-scatter then all-gather) and 1 otherwise, and a local
// step costs its bytes over local_bytes_per_s. A group spanning several mesh dims uses the
// slowest of them. The defaults describe the in-process threads backend on a small machine; set
// your own per mesh dim (e.g. measured with bench/collectives_bench) with set_cost_model.
//
// Measured lines replace that formula: tessera-shardbench's calibration times every collective
// kind on every group size of its meshes and fits seconds = alpha + beta * bytes; the same model
// then plans the redistributes of the strategies it runs and predicts their step times (one
// cost model, shared by the planner and the tool).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/dtensor/redistribute/plan.h"

namespace tessera::dtensor {

struct LinkCost {
  double alpha_s = 1e-6;
  double beta_s_per_byte = 1.0 / 8e9;
};

// seconds = count * alpha_s + beta_s_per_byte * bytes, for `count` calls whose whole messages
// (the larger of input and output, as CommDebugMode counts them) total `bytes`.
struct CollectiveLine {
  double alpha_s = 0.0;
  double beta_s_per_byte = 0.0;
  double seconds(int64_t count, int64_t bytes) const {
    return static_cast<double>(count) * alpha_s + beta_s_per_byte * static_cast<double>(bytes);
  }
};

struct CostModel {
  // Fixed cost of issuing one collective (synchronization, bookkeeping).
  double call_s = 5e-6;
  // Per mesh dim; mesh dims past the end use `fallback`.
  std::vector<LinkCost> per_mesh_dim;
  LinkCost fallback;
  double local_bytes_per_s = 4e9;

  // Measured lines by collective name (collectives/observer.h: all_reduce,
  // all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single) and group size.
  std::map<std::string, CollectiveLine> measured;

  const LinkCost& link(int64_t mesh_dim) const;
  void set_line(std::string_view collective, int64_t group_size, const CollectiveLine& line);
  // The measured line, or nullptr.
  const CollectiveLine* line(std::string_view collective, int64_t group_size) const;
  // Seconds of `count` calls of a collective over `group_size` ranks whose whole messages total
  // `bytes`: the measured line when there is one, else the link formula over `mesh_dims` (the
  // slowest link; `fallback` when empty).
  double seconds(std::string_view collective, int64_t group_size, int64_t count, int64_t bytes,
                 const std::vector<int64_t>& mesh_dims = {}) const;
};

// The model plans use (process-wide). Setting it drops cached plans made under the previous one.
const CostModel& cost_model();
void set_cost_model(const CostModel& model);
// Incremented by set_cost_model (plan caches compare it).
uint64_t cost_model_version();

// Estimated seconds and bytes sent+received per rank for one step of a plan over a tensor
// described by `spec`, from the average shard size: identical on every rank, so that all ranks
// choose the same plan.
struct StepCost {
  double seconds = 0.0;
  int64_t wire_bytes = 0;
};
StepCost step_cost(const DTensorSpec& spec, const RedistributeStep& step, const CostModel& model);

}  // namespace tessera::dtensor
