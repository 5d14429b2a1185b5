#pragma once
// A redistribute plan: the steps that take a DTensor from one placement list to another on the
// same mesh, each changing the placement of one mesh dim — or of several contiguous mesh dims at
// once through their flattened group (see Note [Choosing a redistribute plan] in planner.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/collectives/call.h"
#include "tessera/dtensor/dtensor_spec.h"

namespace tessera::dtensor {

enum class StepKind : uint8_t {
  AllGather,      // S(d) / _S(d) -> R
  AllToAll,       // S(d) -> S(e)
  Chunk,          // R -> S(d) / _S(d), local
  AllReduce,      // P -> R
  ReduceScatter,  // P -> S(d) / _S(d)
  Partition,      // R -> P, local
  Keep,           // a mesh dim of size 1: the local tensor does not change
};

// The collective's name as CommDebugMode reports it ("all_gather_into_tensor", ...) or "local".
const char* step_kind_name(StepKind kind);

struct RedistributeStep {
  StepKind kind = StepKind::Keep;
  // The mesh dims that change (ascending); more than one: their flattened group is used.
  std::vector<int64_t> mesh_dims;
  // The placement list before and after the step.
  Placements from;
  Placements to;
};

struct RedistributePlan {
  std::vector<RedistributeStep> steps;
  // Estimated seconds under the mesh's cost model (dtensor/redistribute/cost_model.h).
  double cost_s = 0.0;
  // Estimated bytes a rank sends and receives in all steps (from the average shard size).
  int64_t bytes_per_rank = 0;
  // What the members of every group the plan uses must agree on: the global shape, dtype, mesh,
  // source and target (Note [Who issues a collective] in collectives/call.h).
  dist::detail::CallContext agreement;
  // Whether this thread logged the plan as priced / issued yet (TESSERA_LOGS, below).
  mutable bool logged_priced = false;
  mutable bool logged_issued = false;

  std::string to_string() const;
};

// The plan from `src` to `dst` placements (already normalized); the same on every rank. Cached
// per thread by (mesh shape and flattened groups, tensor shape, dtype, source, target); the
// reference stays valid for the thread's lifetime. Errors: a Partial reduce op that cannot be
// produced from Replicate (product, bitwise).
const RedistributePlan& plan_redistribute(const DTensorSpec& src, const Placements& dst);

// TESSERA_LOGS=dtensor (or +dtensor) prints to stderr, tagged with the rank, the first time this
// thread prices a plan (a placement choice weighing it: nothing is communicated) and the first
// time it issues it.
enum class PlanUse { kPriced, kIssued };
void log_plan_use(const RedistributePlan& plan, PlanUse use);

}  // namespace tessera::dtensor
