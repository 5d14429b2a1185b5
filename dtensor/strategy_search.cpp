#include "tessera/dtensor/strategy_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>

#include "tessera/dtensor/rules/rule_table.h"

namespace tessera::dtensor {

namespace {

bool in_range(const Placement& p, int64_t rank) {
  return !p.is_shard() || (p.dim() >= 0 && p.dim() < rank && p.split_factor() >= 1);
}

bool usable(const ShardingStrategy& s, const std::vector<int64_t>& input_ranks,
            const std::vector<int64_t>& output_ranks) {
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (input_ranks[i] >= 0 && !in_range(s.inputs[i], input_ranks[i])) return false;
  }
  for (size_t o = 0; o < s.outputs.size(); ++o) {
    if (!in_range(s.outputs[o], output_ranks[o])) return false;
  }
  return true;
}

void append_placement(std::string& key, const Placement& p) {
  key += fmt::format("{}:{}:{}:{};", static_cast<int>(p.kind()), p.is_shard() ? p.dim() : 0,
                     p.is_shard() ? p.split_factor() : 0,
                     p.is_partial() ? static_cast<int>(p.reduce_op()) : 0);
}

// Absent inputs' entries do not take part: strategies differing only there are repeats.
std::string key_of(const ShardingStrategy& s, const std::vector<int64_t>& input_ranks) {
  std::string key;
  for (const Placement& p : s.outputs) append_placement(key, p);
  key += '|';
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (input_ranks[i] >= 0) append_placement(key, s.inputs[i]);
    key += ',';
  }
  return key;
}

bool is_all_replicate(const ShardingStrategy& s, const std::vector<int64_t>& input_ranks) {
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (input_ranks[i] >= 0 && !s.inputs[i].is_replicate()) return false;
  }
  return std::all_of(s.outputs.begin(), s.outputs.end(),
                     [](const Placement& p) { return p.is_replicate(); });
}

// Tells once per op and process that a user rule returned strategies out of range.
void report_dropped(const char* op, size_t dropped, size_t returned) {
  static std::mutex mutex;
  static std::set<std::string> told;
  std::lock_guard lock(mutex);
  if (!told.insert(op).second) return;
  std::cerr << fmt::format(
      "[tessera dtensor] warning: the sharding rule registered for '{}' returned {} of {} "
      "strategies that shard a dim the tensors do not have (or with a split factor below 1); "
      "they are ignored (said once per op)\n",
      op, dropped, returned);
}

}  // namespace

size_t clean_strategies(const char* op, std::vector<ShardingStrategy>& strategies,
                        const std::vector<int64_t>& input_ranks,
                        const std::vector<int64_t>& output_ranks, bool user_rule) {
  const size_t returned = strategies.size();
  size_t dropped = 0;
  std::unordered_set<std::string> seen;
  std::vector<ShardingStrategy> kept;
  kept.reserve(strategies.size() + 1);
  std::optional<size_t> replicate_at;
  for (ShardingStrategy& s : strategies) {
    if (!usable(s, input_ranks, output_ranks)) {
      ++dropped;
      continue;
    }
    if (!seen.insert(key_of(s, input_ranks)).second) continue;
    if (!replicate_at.has_value() && is_all_replicate(s, input_ranks)) replicate_at = kept.size();
    kept.push_back(std::move(s));
  }
  if (!replicate_at.has_value()) {
    replicate_at = kept.size();
    kept.push_back(all_replicate(output_ranks.size(), input_ranks.size()));
  }
  if (user_rule && dropped > 0) report_dropped(op, dropped, returned);
  strategies = std::move(kept);
  return *replicate_at;
}

bool bound_strategies(std::vector<std::vector<ShardingStrategy>>& per_dim,
                      const std::vector<size_t>& replicate_at, const ScoreFn& score,
                      size_t max_combinations) {
  const size_t dims = per_dim.size();
  double product = 1.0;
  for (const auto& list : per_dim) product *= static_cast<double>(list.size());
  if (dims == 0 || product <= static_cast<double>(max_combinations)) return false;
  // The same number per mesh dim: the largest k with k^dims <= max_combinations (at least 2,
  // so that one strategy beside all-Replicate survives on every mesh dim).
  // pow rounds: 4096^(1/3) is 15.99..., so start above and step down with exact products.
  const auto fits = [&](size_t k) {
    double combinations = 1.0;
    for (size_t m = 0; m < dims; ++m) combinations *= static_cast<double>(k);
    return combinations <= static_cast<double>(max_combinations);
  };
  auto keep = static_cast<size_t>(
      std::pow(static_cast<double>(max_combinations), 1.0 / static_cast<double>(dims)) + 1.0);
  while (keep > 2 && !fits(keep)) --keep;
  // Every list is ranked before any is shortened: `score` indexes the lists as they are.
  std::vector<std::vector<size_t>> chosen(dims);
  for (size_t m = 0; m < dims; ++m) {
    chosen[m].push_back(replicate_at[m]);
    if (per_dim[m].size() <= keep) {
      chosen[m].resize(per_dim[m].size());
      for (size_t j = 0; j < per_dim[m].size(); ++j) chosen[m][j] = j;
      continue;
    }
    struct Ranked {
      CandidateScore score;
      size_t index;
    };
    std::vector<Ranked> ranked;
    std::vector<size_t> pick = replicate_at;
    for (size_t j = 0; j < per_dim[m].size(); ++j) {
      if (j == replicate_at[m]) continue;
      pick[m] = j;
      if (const std::optional<CandidateScore> s = score(pick)) ranked.push_back({*s, j});
    }
    // Cheapest first, then fewest changes, then the rule's order.
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
      if (a.score.cost != b.score.cost) return a.score.cost < b.score.cost;
      return a.score.changes < b.score.changes;
    });
    for (size_t k = 0; k < ranked.size() && chosen[m].size() < keep; ++k) {
      chosen[m].push_back(ranked[k].index);
    }
    std::sort(chosen[m].begin(), chosen[m].end());
  }
  for (size_t m = 0; m < dims; ++m) {
    std::vector<ShardingStrategy> shortened;
    shortened.reserve(chosen[m].size());
    for (size_t j : chosen[m]) shortened.push_back(std::move(per_dim[m][j]));
    per_dim[m] = std::move(shortened);
  }
  return true;
}

}  // namespace tessera::dtensor
