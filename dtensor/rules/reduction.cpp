// Rules of reductions. A dim that is not reduced keeps its shard (renumbered when dims drop). A
// reduced sharded dim leaves each rank a partial result: sum -> P(sum), amax -> P(max), amin ->
// P(min); amax and amin only when the dim splits evenly over the mesh (no shard is empty, which
// they cannot reduce). mean of a DTensor is sum / count (runtime/ops/reduction.cpp). Other
// reductions (prod, var, norm, arg*, max/min with a dim) need the reduced dims whole.

#include <algorithm>
#include <optional>

#include "tessera/dtensor/rules/rule_table.h"

namespace tessera::dtensor {
namespace {

using dist::ReduceOp;

struct Reduced {
  std::vector<int64_t> dims;  // wrapped, sorted; every dim for the flattened arg reductions
  bool keepdim = false;
  bool flat = false;
};

Reduced reduced_of(const ShardingCall& call) {
  Reduced r{call.attrs.ints, call.attrs.flag,
            call.op.size() > 5 && call.op.compare(call.op.size() - 5, 5, ".flat") == 0};
  if (r.flat) {
    r.dims.clear();
    for (int64_t d = 0; d < static_cast<int64_t>(call.inputs[0].shape.size()); ++d) {
      r.dims.push_back(d);
    }
  }
  return r;
}

bool is_reduced(const Reduced& r, int64_t d) {
  return std::binary_search(r.dims.begin(), r.dims.end(), d);
}

// The output dim a kept input dim lands on.
int64_t output_dim(const Reduced& r, int64_t d) {
  if (r.keepdim) return d;
  return d - std::count_if(r.dims.begin(), r.dims.end(), [d](int64_t x) { return x < d; });
}

std::vector<Shape> reduced_shapes(const ShardingCall& call, size_t outputs) {
  const Reduced r = reduced_of(call);
  const Shape& in = call.inputs[0].shape;
  Shape out;
  if (r.flat) {
    if (r.keepdim) out = Shape(in.size(), 1);
  } else {
    for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
      if (!is_reduced(r, d)) {
        out.push_back(in[static_cast<size_t>(d)]);
      } else if (r.keepdim) {
        out.push_back(1);
      }
    }
  }
  return std::vector<Shape>(outputs, out);
}

// The Partial a reduced sharded dim leaves (and the Partial input the reduction keeps).
std::optional<ReduceOp> partial_of(const std::string& op) {
  if (op == "sum") return ReduceOp::Sum;
  if (op == "amax") return ReduceOp::Max;
  if (op == "amin") return ReduceOp::Min;
  return std::nullopt;
}

ShardingRuleFn reduction_rule(size_t outputs) {
  return [outputs](const ShardingCall& call) {
    const Reduced r = reduced_of(call);
    const Shape& in = call.inputs[0].shape;
    const std::optional<ReduceOp> partial = partial_of(call.op);
    std::vector<ShardingStrategy> list;
    const auto one = [&](const Placement& out, const Placement& input) {
      list.push_back(ShardingStrategy{std::vector<Placement>(outputs, out), {input}});
    };
    for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
      if (!is_reduced(r, d)) {
        one(Shard(output_dim(r, d)), Shard(d));
      } else if (partial.has_value() &&
                 (*partial == ReduceOp::Sum || splits_evenly(call, in[static_cast<size_t>(d)]))) {
        one(Partial(*partial), Shard(d));
      }
    }
    // A StridedShard of a kept dim stays; a summed one is partial like a Shard.
    const Placement& current = call.inputs[0].placements[static_cast<size_t>(call.mesh_dim)];
    if (current.is_strided_shard()) {
      const int64_t d = current.dim();
      if (!is_reduced(r, d)) {
        one(StridedShard(output_dim(r, d), current.split_factor()), current);
      } else if (partial == ReduceOp::Sum) {
        one(Partial(ReduceOp::Sum), current);
      }
    }
    if (partial == ReduceOp::Sum || partial == ReduceOp::Avg) {
      for (ReduceOp op : kLinearPartials) one(Partial(op), Partial(op));
    } else if (partial.has_value()) {
      one(Partial(*partial), Partial(*partial));
    }
    return list;
  };
}

}  // namespace

void add_reduction_rules(RuleTable& table) {
  const auto one = [](const ShardingCall& c) { return reduced_shapes(c, 1); };
  const auto two = [](const ShardingCall& c) { return reduced_shapes(c, 2); };
  for (const char* op : {"sum", "prod", "amax", "amin", "var", "norm", "argmax.dim", "argmin.dim",
                         "argmax.flat", "argmin.flat"}) {
    table[op] = OpRule{reduction_rule(1), one, "", false};
  }
  for (const char* op : {"max.dim", "min.dim"})
    table[op] = OpRule{reduction_rule(2), two, "", false};
}

}  // namespace tessera::dtensor
