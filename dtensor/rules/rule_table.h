#pragma once
// The built-in sharding rules, one table keyed by registry name (the op names runtime/ops pass to
// distributed_op). Each family adds its rows in dtensor/rules/<family>.cpp; rule_table.cpp calls
// them all, once (see dtensor/README.md, "Adding an op").

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/dtensor/partial_factors.h"
#include "tessera/dtensor/sharding_rule.h"

namespace tessera::dtensor {

// The global shapes of an op's outputs, from its inputs' specs and attributes.
using OutputShapesFn = std::function<std::vector<Shape>(const ShardingCall&)>;

struct OpRule {
  // Strategies for one mesh dim; null for a replicate-only op (every input and output
  // Replicate, the local op computing the whole result on every rank).
  ShardingRuleFn strategies;
  // Null for replicate-only ops: the outputs' shapes are the local results'.
  OutputShapesFn output_shapes;
  // Why an op is replicate-only (printed by the coverage test and the logs).
  std::string replicate_only_reason;
  // Writes its first input, whose placements therefore never change.
  bool in_place = false;
  // Returns a view of its first input: the result has the single-device view's global strides
  // and storage offset (Note [Global geometry of views] in dtensor/view_geometry.h).
  bool view = false;
  // Which operands beside a Partial input must be finite (Note [Partial times a factor that is
  // not finite] in dtensor/partial_factors.h).
  PartialFactors partial_factors = PartialFactors::kNone;
};

using RuleTable = std::map<std::string, OpRule, std::less<>>;

void add_pointwise_rules(RuleTable& table);
void add_reduction_rules(RuleTable& table);
void add_matmul_rules(RuleTable& table);
void add_view_rules(RuleTable& table);
void add_concat_rules(RuleTable& table);
void add_nn_rules(RuleTable& table);

// Every built-in rule (filled on first use).
const RuleTable& builtin_rules();

// ---- helpers for writing rules ----

// A strategy with every output and input Replicate.
ShardingStrategy all_replicate(size_t outputs, size_t inputs);
// Whether `size` splits evenly over every rank of the mesh (a conservative test for rules that
// need equal shards whichever mesh dims end up sharding the dim).
bool splits_evenly(const ShardingCall& call, int64_t size);
// The Partial reduce ops that sum-like linear ops preserve.
inline constexpr dist::ReduceOp kLinearPartials[] = {dist::ReduceOp::Sum, dist::ReduceOp::Avg};

}  // namespace tessera::dtensor
