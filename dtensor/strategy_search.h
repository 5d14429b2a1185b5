#pragma once
// Internal: the strategy lists of one op call before dispatch combines them over the mesh dims
// (Note [Choosing placements for an op] in dtensor/sharding_rule.h).
//
// Note [Bounding the strategy search]
// A rule's strategies hold for one mesh dim, and dispatch prices every combination of one
// strategy per mesh dim: (strategies)^(mesh dims) candidates. A user rule may return thousands
// (5,000 on a 2-D mesh took more than 30 s), many of them repeats or out of range. So each mesh
// dim's list is cleaned first: strategies that shard a dim the tensor does not have are dropped
// (they could never be chosen; a user rule is told once), repeats are dropped (the first stays:
// order breaks ties), and all-Replicate is added last unless present. When the product still
// exceeds kMaxStrategyCombinations, each mesh dim keeps its best strategies priced with the other
// mesh dims all-Replicate (all-Replicate itself always kept), as many as keep the product under
// the bound, and the search runs over those. Every rank cleans and prices alike, so every rank
// still picks the same.

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "tessera/dtensor/sharding_rule.h"

namespace tessera::dtensor {

inline constexpr size_t kMaxStrategyCombinations = size_t{1} << 16;

// A candidate's price: (cost, number of input placements it changes); nullopt: not a candidate.
struct CandidateScore {
  double cost = 0.0;
  size_t changes = 0;
};
using ScoreFn = std::function<std::optional<CandidateScore>(const std::vector<size_t>& pick)>;

// Cleans one mesh dim's list in place (see the Note) and returns the index of its all-Replicate
// strategy. input_ranks[i]: the rank of input i, or -1 for an absent input (its entries are
// ignored); output_ranks[o]: the rank of output o. `user_rule`: a register_sharding rule, told
// once per op about the strategies it returned out of range.
size_t clean_strategies(const char* op, std::vector<ShardingStrategy>& strategies,
                        const std::vector<int64_t>& input_ranks,
                        const std::vector<int64_t>& output_ranks, bool user_rule);

// Shortens the lists so that their product is at most `max_combinations` (see the Note);
// replicate_at[m]: list m's all-Replicate index; `score` prices a combination (one index per
// mesh dim into the lists as given). Lists keep their order. Returns whether it shortened any.
bool bound_strategies(std::vector<std::vector<ShardingStrategy>>& per_dim,
                      const std::vector<size_t>& replicate_at, const ScoreFn& score,
                      size_t max_combinations = kMaxStrategyCombinations);

}  // namespace tessera::dtensor
