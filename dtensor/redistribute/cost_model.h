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

#include <cstdint>
#include <vector>

#include "dtensor/redistribute/plan.h"

namespace tessera::dtensor {

struct LinkCost {
  double alpha_s = 1e-6;
  double beta_s_per_byte = 1.0 / 8e9;
};

struct CostModel {
  // Fixed cost of issuing one collective (synchronization, bookkeeping).
  double call_s = 5e-6;
  // Per mesh dim; mesh dims past the end use `fallback`.
  std::vector<LinkCost> per_mesh_dim;
  LinkCost fallback;
  double local_bytes_per_s = 4e9;

  const LinkCost& link(int64_t mesh_dim) const;
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
