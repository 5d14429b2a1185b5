#include "tessera/dtensor/rules/rule_table.h"

namespace tessera::dtensor {

const RuleTable& builtin_rules() {
  static const RuleTable table = [] {
    RuleTable t;
    add_pointwise_rules(t);
    add_reduction_rules(t);
    add_matmul_rules(t);
    add_view_rules(t);
    add_concat_rules(t);
    add_nn_rules(t);
    for (const auto& [name, rule] : t) {
      TS_INTERNAL_ASSERT((rule.strategies == nullptr) == !rule.replicate_only_reason.empty() &&
                             (rule.strategies == nullptr) == (rule.output_shapes == nullptr),
                         "sharding rule table: '", name,
                         "' must have strategies and shapes, or be replicate-only with a reason");
    }
    return t;
  }();
  return table;
}

ShardingStrategy all_replicate(size_t outputs, size_t inputs) {
  return ShardingStrategy{std::vector<Placement>(outputs, Replicate()),
                          std::vector<Placement>(inputs, Replicate())};
}

bool splits_evenly(const ShardingCall& call, int64_t size) { return size % call.mesh.size() == 0; }

}  // namespace tessera::dtensor
