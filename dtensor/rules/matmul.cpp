// Rules of matmul / mm / bmm (linear is made of matmul and add, each with its rule). With a
// [..., M, K] and b [..., K, N] (1-D operands have no M or N):
//   a S(M), b R        -> S(M)          a R, b S(N)   -> S(N)
//   a S(K), b S(K)     -> P(sum)        a and b S(batch dim) -> S(batch dim)
//   a P(sum/avg), b R  -> P(sum/avg)    a R, b P(sum/avg)    -> P(sum/avg)  (linear in each)

#include <algorithm>

#include "tessera/dtensor/rules/rule_table.h"

namespace tessera::dtensor {
namespace {

using dist::ReduceOp;

struct Layout {
  int64_t a_nd = 0, b_nd = 0;
  Shape batch;  // the broadcast batch dims
  Shape out;
};

Layout layout_of(const ShardingCall& call) {
  const Shape& a = call.inputs[0].shape;
  const Shape& b = call.inputs[1].shape;
  Layout l{static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()), {}, {}};
  const Shape a_batch = l.a_nd > 2 ? Shape(a.begin(), a.end() - 2) : Shape{};
  const Shape b_batch = l.b_nd > 2 ? Shape(b.begin(), b.end() - 2) : Shape{};
  // On the global shapes, so that every rank raises alike (local shards may happen to fit).
  TS_CHECK_SHAPE(!a.empty() && !b.empty(), "[", call.op, "] needs tensors of at least 1 dim, got ",
                 a, " and ", b);
  // mm and bmm do not broadcast: their own checks, as the single-device ops make them.
  if (call.op == "mm") {
    TS_CHECK_SHAPE(a.size() == 2 && b.size() == 2, "[mm] expects 2-D tensors, got shapes ", a,
                   " and ", b);
  } else if (call.op == "bmm") {
    TS_CHECK_SHAPE(a.size() == 3 && b.size() == 3, "[bmm] expects 3-D tensors, got shapes ", a,
                   " and ", b);
    TS_CHECK_SHAPE(a[0] == b[0], "[bmm] batch sizes must be equal, got shapes ", a, " and ", b);
  }
  const int64_t k_a = a.back();
  const int64_t k_b = l.b_nd == 1 ? b[0] : b[b.size() - 2];
  TS_CHECK_SHAPE(k_a == k_b, "[", call.op, "] shapes ", a, " and ", b, " cannot be multiplied (",
                 k_a, " != ", k_b, ")");
  const size_t n = std::max(a_batch.size(), b_batch.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - a_batch.size() ? 1 : a_batch[i - (n - a_batch.size())];
    const int64_t sb = i < n - b_batch.size() ? 1 : b_batch[i - (n - b_batch.size())];
    TS_CHECK_SHAPE(sa == sb || sa == 1 || sb == 1, "[", call.op, "] batch dimensions of shapes ", a,
                   " and ", b, " cannot be broadcast: size ", sa, " vs ", sb,
                   " (sizes must match or one of them must be 1)");
  }
  l.batch = broadcast_shapes(a_batch, b_batch, call.op.c_str());
  l.out = l.batch;
  if (l.a_nd >= 2) l.out.push_back(a[a.size() - 2]);
  if (l.b_nd >= 2) l.out.push_back(b[b.size() - 1]);
  return l;
}

std::vector<ShardingStrategy> matmul_strategies(const ShardingCall& call) {
  const Layout l = layout_of(call);
  const auto nb = static_cast<int64_t>(l.batch.size());
  std::vector<ShardingStrategy> list;
  if (l.a_nd >= 2) list.push_back({{Shard(nb)}, {Shard(l.a_nd - 2), Replicate()}});
  if (l.b_nd >= 2) {
    list.push_back({{Shard(nb + (l.a_nd >= 2 ? 1 : 0))}, {Replicate(), Shard(l.b_nd - 1)}});
  }
  list.push_back({{Partial()}, {Shard(l.a_nd - 1), Shard(l.b_nd == 1 ? 0 : l.b_nd - 2)}});
  // Batch dims: each operand sharded on its own matching dim, Replicate where it broadcasts.
  const auto batch_placement = [&](int64_t nd, const Shape& shape, int64_t bd) -> Placement {
    if (nd <= 2) return Replicate();
    const int64_t own = bd - (nb - (nd - 2));
    return own >= 0 && shape[static_cast<size_t>(own)] == l.batch[static_cast<size_t>(bd)]
               ? Placement(Shard(own))
               : Placement(Replicate());
  };
  for (int64_t bd = 0; bd < nb; ++bd) {
    ShardingStrategy s{{Shard(bd)},
                       {batch_placement(l.a_nd, call.inputs[0].shape, bd),
                        batch_placement(l.b_nd, call.inputs[1].shape, bd)}};
    if (s.inputs[0].is_shard() || s.inputs[1].is_shard()) list.push_back(std::move(s));
  }
  for (ReduceOp op : kLinearPartials) {
    list.push_back({{Partial(op)}, {Partial(op), Replicate()}});
    list.push_back({{Partial(op)}, {Replicate(), Partial(op)}});
  }
  return list;
}

}  // namespace

void add_matmul_rules(RuleTable& table) {
  const auto shapes = [](const ShardingCall& c) { return std::vector<Shape>{layout_of(c).out}; };
  for (const char* op : {"matmul", "mm", "bmm"}) {
    table[op] = OpRule{matmul_strategies, shapes, "", false};
    table[op].partial_factors = PartialFactors::kFactors;
  }
}

}  // namespace tessera::dtensor
