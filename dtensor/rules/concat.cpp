// Rules of cat and stack: every input sharded on the same dim other than the joined one (stack:
// renumbered past the new dim), or every input Partial with one reduce op (joining is linear).

#include "tessera/dtensor/rules/rule_table.h"
#include "tessera/runtime/ops/join_shapes.h"

namespace tessera::dtensor {
namespace {

using dist::ReduceOp;

// torch.cat skips 1-D empty inputs next to tensors of any rank.
bool skipped(const DTensorSpec& s) { return detail::skipped_by_cat(s.shape); }

const DTensorSpec& reference(const ShardingCall& call) {
  for (const DTensorSpec& s : call.inputs) {
    if (!skipped(s)) return s;
  }
  return call.inputs[0];
}

int64_t joined_dim(const ShardingCall& call, bool stack) {
  const auto nd = static_cast<int64_t>(reference(call).shape.size()) + (stack ? 1 : 0);
  const int64_t d = call.attrs.ints[0];
  return d < 0 ? d + nd : d;
}

ShardingRuleFn joined(bool stack) {
  return [stack](const ShardingCall& call) {
    const size_t n = call.inputs.size();
    const int64_t dim = joined_dim(call, stack);
    const auto nd = static_cast<int64_t>(reference(call).shape.size());
    std::vector<ShardingStrategy> list;
    for (int64_t e = 0; e < nd; ++e) {
      if (!stack && e == dim) continue;
      ShardingStrategy s{{Shard(stack && e >= dim ? e + 1 : e)}, {}};
      for (const DTensorSpec& in : call.inputs) {
        s.inputs.push_back(skipped(in) && !stack ? Placement(Replicate()) : Placement(Shard(e)));
      }
      list.push_back(std::move(s));
    }
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      list.push_back({{Partial(op)}, std::vector<Placement>(n, Partial(op))});
    }
    return list;
  };
}

// On the global shapes, so that every rank raises before any computes (a local shard's shape
// can fit where the global one does not).
std::vector<Shape> joined_shape(const ShardingCall& call, bool stack) {
  std::vector<Shape> shapes;
  for (const DTensorSpec& s : call.inputs) shapes.push_back(s.shape);
  const int64_t dim = call.attrs.ints[0];
  return {stack ? detail::stack_shape(shapes, dim) : detail::cat_shape(shapes, dim)};
}

}  // namespace

void add_concat_rules(RuleTable& table) {
  table["cat"] = OpRule{joined(false), [](const ShardingCall& c) { return joined_shape(c, false); },
                        "", false};
  table["stack"] =
      OpRule{joined(true), [](const ShardingCall& c) { return joined_shape(c, true); }, "", false};
}

}  // namespace tessera::dtensor
