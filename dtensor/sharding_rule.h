#pragma once
// Sharding rules (torch's register_sharding, one mesh dim at a time as torch 2.15): for an op on
// DTensors, the placements its inputs may have on one mesh dim and the placements its outputs
// then have. Every op of API §1 has a built-in rule (dtensor/rules/); register_sharding replaces
// one for the process.
//
// Note [Choosing placements for an op]
// dtensor/dispatch.cpp asks the op's rule for the strategies of each mesh dim, adds
// all-Replicate, and takes every combination (one strategy per mesh dim). A combination is a
// candidate when it passes the checks every placement list must pass (a tensor dim sharded
// along several mesh dims is nested, as torch; Partial ops do not mix). Its cost is the
// redistribute planner's estimate for moving each input from its placements to the
// combination's (0 for inputs already there); the cheapest wins, ties to the first in order,
// so every rank picks the same. In-place ops keep the written tensor's placements: only
// combinations that leave it as it is are candidates. The choice is cached per rank thread by
// the op, its attributes and the input specs.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/dtensor/dtensor_spec.h"
#include "tessera/runtime/distributed.h"

namespace tessera {

// One way to run an op on one mesh dim: a placement per output and per tensor input (absent
// optional inputs included, their entry ignored).
struct ShardingStrategy {
  std::vector<Placement> outputs;
  std::vector<Placement> inputs;
};

// What a rule sees: the op's registry name ("add", "sum", "matmul", "view", ...), the specs of
// its tensor inputs (an absent optional input has empty placements; a plain tensor taken as
// Replicate has all-Replicate ones), the mesh, the mesh dim asked about, and the op's
// non-tensor arguments (OpAttrs: for each op, what runtime/ops passes to distributed_op).
struct ShardingCall {
  std::string op;
  std::vector<DTensorSpec> inputs;
  DeviceMesh mesh;
  int64_t mesh_dim = 0;
  OpAttrs attrs;

  bool has_input(size_t i) const { return i < inputs.size() && !inputs[i].placements.empty(); }
};

using ShardingRuleFn = std::function<std::vector<ShardingStrategy>(const ShardingCall&)>;

struct RegisterShardingOptions {
  // Checks the rule against the op: the first call that runs with each strategy chosen from the
  // rule's list also runs the op on the whole tensors, and a result that differs is an Error on
  // every rank naming the op and the placements (Note [Checking user rules] in
  // dtensor/rule_check.h). For developing a rule: it gathers every input and output once per
  // strategy. TESSERA_VALIDATE_SHARDING=1 turns it on for every registered rule.
  bool validate = false;
};

// Replaces the rule of `op` (a registry name; see dtensor/README.md) for every rank of the
// process; cached choices are dropped. Errors: an op that is not in the registry.
void register_sharding(const std::string& op, ShardingRuleFn rule,
                       RegisterShardingOptions options = {});
// Back to the built-in rule. Errors: an op that is not in the registry.
void unregister_sharding(const std::string& op);

// Every op name of the registry, sorted; and why an op is replicate-only (empty when it has a
// sharding rule). For coverage tests and tools.
std::vector<std::string> sharding_op_names();
std::string replicate_only_reason(const std::string& op);

// Drops the calling rank thread's cached placement choices (benchmarks time the cache miss).
void clear_sharding_cache();

// While one lives on the calling thread, plain tensors passed to ops together with DTensors are
// taken as Replicate on the DTensors' mesh (PyTorch's implicit_replication); without it only
// one-element plain tensors are. Nests.
class ImplicitReplicationGuard {
 public:
  ImplicitReplicationGuard();
  ~ImplicitReplicationGuard();
  ImplicitReplicationGuard(const ImplicitReplicationGuard&) = delete;
  ImplicitReplicationGuard& operator=(const ImplicitReplicationGuard&) = delete;
  static bool active();
};

}  // namespace tessera
