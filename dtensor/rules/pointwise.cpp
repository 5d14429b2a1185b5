// Rules of pointwise ops (elementwise unary / binary / scalar variants, where, clamp, casts,
// copies, fills, *_like factories): any dim of the broadcast output may be sharded, each input
// sharded on its matching dim (Replicate where it broadcasts), plus the Partial placements the
// op is exact on (Note [Partial linearity]).
//
// Note [Partial linearity]
// A Partial(op) input may stay Partial only where applying the op to the ranks' partial values
// and reducing gives the op of the reduced value exactly (up to summation order):
//   add/sub: P(sum), P(sum) -> P(sum) (avg alike); P(avg) with a Replicate operand -> P(avg);
//            P(max/min) + a Replicate or scalar -> P(max/min) (rounding is monotone)
//   mul/div: P(sum/avg) times (divided by) Replicate -> P(sum/avg)
//   neg:     P(sum/avg) -> itself, P(max) <-> P(min); relu, clamp: P(max/min) -> itself
//   maximum/minimum: P(max)/P(min) with P(max)/P(min) or Replicate
//   where:   P(sum/avg) in both values with a Replicate condition
//   casts, clone, copies: every Partial (floating to floating)
// Anything else (exp of P(sum), P(sum) + Replicate, ...) is not exact: the rule offers no
// Partial strategy, so the dispatcher reduces the input first. Under autograd only the P(sum)
// outputs remain candidates (Note [Partial outputs under autograd] in dtensor/dispatch.cpp).

#include <algorithm>
#include <cmath>
#include <set>

#include "tessera/dtensor/rules/rule_table.h"
#include "tessera/runtime/op_table.h"

namespace tessera::dtensor {
namespace {

using dist::ReduceOp;

Shape broadcast_output(const ShardingCall& call) {
  Shape out;
  bool first = true;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (!call.has_input(i)) continue;
    // Named after the op: the global shapes are what the user gave it.
    out =
        first ? call.inputs[i].shape : broadcast_shapes(out, call.inputs[i].shape, call.op.c_str());
    first = false;
  }
  return out;
}

// Sharding strategies: output dim d sharded, each input on its own matching dim (Replicate where
// it broadcasts); `make(dim)` builds Shard or StridedShard. Dims no input has are skipped: the
// local op would compute them whole.
template <typename Make>
void add_sharded(const ShardingCall& call, const Shape& out, std::vector<ShardingStrategy>& list,
                 const Make& make) {
  const auto nd = static_cast<int64_t>(out.size());
  for (int64_t d = 0; d < nd; ++d) {
    ShardingStrategy s{{make(d)}, {}};
    bool any_sharded = false;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      if (!call.has_input(i)) {
        s.inputs.push_back(Replicate());
        continue;
      }
      const Shape& in = call.inputs[i].shape;
      const int64_t di = d - (nd - static_cast<int64_t>(in.size()));
      if (di >= 0 && in[static_cast<size_t>(di)] == out[static_cast<size_t>(d)]) {
        s.inputs.push_back(make(di));
        any_sharded = true;
      } else {
        s.inputs.push_back(Replicate());
      }
    }
    if (any_sharded) list.push_back(std::move(s));
  }
}

std::vector<ShardingStrategy> sharded_strategies(const ShardingCall& call) {
  const Shape out = broadcast_output(call);
  std::vector<ShardingStrategy> list;
  add_sharded(call, out, list, [](int64_t d) -> Placement { return Shard(d); });
  // A StridedShard input keeps its layout through a pointwise op (the same pieces on the same
  // ranks): offer it for each split factor present.
  std::set<int64_t> factors;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (!call.has_input(i)) continue;
    const Placement& p = call.inputs[i].placements[static_cast<size_t>(call.mesh_dim)];
    if (p.is_strided_shard()) factors.insert(p.split_factor());
  }
  for (int64_t sf : factors) {
    add_sharded(call, out, list, [sf](int64_t d) -> Placement { return StridedShard(d, sf); });
  }
  return list;
}

// out = in_op for every input in `value_inputs`, Replicate for the others.
ShardingStrategy partial_strategy(size_t n_inputs, const std::vector<size_t>& value_inputs,
                                  const Placement& in, const Placement& out) {
  ShardingStrategy s{{out}, std::vector<Placement>(n_inputs, Replicate())};
  for (size_t i : value_inputs) s.inputs[i] = in;
  return s;
}

// A rule: the sharded strategies plus `partials(call, list)`.
using Partials = void (*)(const ShardingCall&, std::vector<ShardingStrategy>&);

ShardingRuleFn pointwise(Partials partials) {
  return [partials](const ShardingCall& call) {
    std::vector<ShardingStrategy> list = sharded_strategies(call);
    if (partials != nullptr) partials(call, list);
    return list;
  };
}

std::vector<Shape> same_as_broadcast(const ShardingCall& call) { return {broadcast_output(call)}; }

void keep(std::vector<ShardingStrategy>& list, size_t n, const std::vector<size_t>& values,
          ReduceOp in, ReduceOp out) {
  list.push_back(partial_strategy(n, values, Partial(in), Partial(out)));
}

// ---- the linearity of each op (Note [Partial linearity]) ----

void sum_like(const ShardingCall& call, std::vector<ShardingStrategy>& list) {
  const size_t n = call.inputs.size();
  std::vector<size_t> all;
  for (size_t i = 0; i < n; ++i) all.push_back(i);
  for (ReduceOp op : kLinearPartials) keep(list, n, all, op, op);
  // sub(R, P(max)) is P(min), and so is add(R, P(max)) with a negative alpha: the second operand
  // keeps max/min only when added with a non-negative factor.
  const bool second_flips =
      call.op.rfind("sub", 0) == 0 || (!call.attrs.reals.empty() && !(call.attrs.reals[0] >= 0));
  if (n == 2) {
    for (size_t i : {size_t{0}, size_t{1}}) {
      for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
        if (i == 1 && second_flips && op != ReduceOp::Avg) continue;
        keep(list, n, {i}, op, op);
      }
    }
  }
}

// Linearity holds for finite factors only: P(sum) * inf makes 0 * inf = NaN on the ranks whose
// part is 0 where one device gives inf, and P / 0 makes 0 / 0. A scalar factor that is not
// finite (or a zero divisor) therefore reduces the Partial first; a Replicate tensor factor is
// checked by dispatch, which sees its data (Note [Partial times a factor that is not finite]).
void scaled(const ShardingCall& call, std::vector<ShardingStrategy>& list, bool either) {
  const bool scalar_form =
      call.op.find(".scalar") != std::string::npos || call.op.find(".rscalar") != std::string::npos;
  if (scalar_form && !call.attrs.reals.empty()) {
    const double factor = call.attrs.reals[0];
    if (!std::isfinite(factor) || (!either && factor == 0.0)) return;
  }
  const size_t n = call.inputs.size();
  for (ReduceOp op : kLinearPartials) {
    keep(list, n, {0}, op, op);
    if (either && n == 2) keep(list, n, {1}, op, op);
  }
}
void mul_like(const ShardingCall& c, std::vector<ShardingStrategy>& l) { scaled(c, l, true); }
void div_like(const ShardingCall& c, std::vector<ShardingStrategy>& l) { scaled(c, l, false); }

void shifted(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) keep(list, 1, {0}, op, op);
}
// s - a: avg stays, max and min swap.
void reverse_shifted(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  keep(list, 1, {0}, ReduceOp::Avg, ReduceOp::Avg);
  keep(list, 1, {0}, ReduceOp::Max, ReduceOp::Min);
  keep(list, 1, {0}, ReduceOp::Min, ReduceOp::Max);
}

void negated(const ShardingCall& call, std::vector<ShardingStrategy>& list) {
  reverse_shifted(call, list);
  keep(list, 1, {0}, ReduceOp::Sum, ReduceOp::Sum);
}

void monotone(const ShardingCall& call, std::vector<ShardingStrategy>& list) {
  const size_t n = call.inputs.size();
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) keep(list, n, {0}, op, op);
}

template <ReduceOp kOp>
void extremum(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  keep(list, 2, {0, 1}, kOp, kOp);
  keep(list, 2, {0}, kOp, kOp);
  keep(list, 2, {1}, kOp, kOp);
}

void where_values(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  for (ReduceOp op : kLinearPartials) keep(list, 3, {1, 2}, op, op);
}

void identity(const ShardingCall& call, std::vector<ShardingStrategy>& list) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    keep(list, call.inputs.size(), {0}, op, op);
  }
}

void cast(const ShardingCall& call, std::vector<ShardingStrategy>& list) {
  const auto target = static_cast<DType>(call.attrs.ints.at(0));
  if (is_floating_point(call.inputs[0].dtype) && is_floating_point(target)) identity(call, list);
}

// copy_(self, src): Partial copies into Partial; a Replicate source into a Partial destination
// only where every rank holding the value reduces to it (avg, max, min).
void copied(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    keep(list, 2, {0, 1}, op, op);
    if (op != ReduceOp::Sum) keep(list, 2, {0}, op, op);
  }
}

void filled(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) keep(list, 1, {0}, op, op);
}

// *_like factories: a Partial input gives a Replicate output (the new values are whole).
void made_whole(const ShardingCall&, std::vector<ShardingStrategy>& list) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    list.push_back(ShardingStrategy{{Replicate()}, {Partial(op)}});
  }
}

Partials binary_partials(BinaryOp op, bool scalar, bool reverse) {
  switch (op) {
    case BinaryOp::kAdd:
      return scalar ? shifted : sum_like;
    case BinaryOp::kSub:
      return scalar ? (reverse ? reverse_shifted : shifted) : sum_like;
    case BinaryOp::kMul:
      return mul_like;
    case BinaryOp::kDiv:
      return reverse ? nullptr : div_like;
    case BinaryOp::kMaximum:
      return scalar ? nullptr : extremum<ReduceOp::Max>;
    case BinaryOp::kMinimum:
      return scalar ? nullptr : extremum<ReduceOp::Min>;
    default:
      return nullptr;
  }
}

void add(RuleTable& table, const std::string& name, Partials partials, bool in_place = false) {
  table[name] = OpRule{pointwise(partials), same_as_broadcast, "", in_place};
}

}  // namespace

void add_pointwise_rules(RuleTable& table) {
#define TS_UNARY(e, name, f)                \
  add(table, name,                          \
      UnaryOp::e == UnaryOp::kNeg ? negated \
                                  : (UnaryOp::e == UnaryOp::kRelu ? monotone : nullptr));
  TS_FOR_EACH_UNARY_OP(TS_UNARY)
#undef TS_UNARY
#define TS_BINARY(e, name, kind)                                \
  add(table, name, binary_partials(BinaryOp::e, false, false)); \
  add(table, std::string(name) + "_", binary_partials(BinaryOp::e, false, false), true);
  TS_FOR_EACH_BINARY_OP(TS_BINARY)
#undef TS_BINARY
  for (const char* name : {"mul", "mul_"}) table[name].partial_factors = PartialFactors::kFactors;
  for (const char* name : {"div", "div_"}) table[name].partial_factors = PartialFactors::kDivisor;
  // The Scalar forms runtime/ops.h has: op(tensor, scalar), op(scalar, tensor), tensor op= scalar.
  for (BinaryOp op :
       {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv, BinaryOp::kPow,
        BinaryOp::kEq, BinaryOp::kNe, BinaryOp::kLt, BinaryOp::kLe, BinaryOp::kGt, BinaryOp::kGe}) {
    add(table, std::string(op_name(op)) + ".scalar", binary_partials(op, true, false));
  }
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
    add(table, std::string(op_name(op)) + ".rscalar", binary_partials(op, true, true));
    add(table, std::string(op_name(op)) + "_.scalar", binary_partials(op, true, false), true);
  }
  add(table, "where", where_values);
  add(table, "clamp", monotone);
  add(table, "to", cast);
  add(table, "to_device", identity);
  add(table, "clone", identity);
  add(table, "contiguous", identity);
  add(table, "copy_", copied, true);
  add(table, "fill_", filled, true);
  add(table, "empty_like", made_whole);
  add(table, "full_like", made_whole);
  // Random ops draw by global index (Note [Random ops on distributed tensors]), so any Shard or
  // StridedShard layout works as it is. dropout is not linear in its draws' sense: a Partial
  // input is reduced first (the single-device op sees the whole value).
  add(table, "rand_like", made_whole);
  add(table, "randn_like", made_whole);
  add(table, "dropout", nullptr);
}

}  // namespace tessera::dtensor
