// Rules of the nn functions: softmax and log_softmax shard any dim but the normalized one;
// layer_norm and rms_norm any leading (not normalized) dim of the input, with weight and bias
// whole; embedding shards the indices (the output follows), the embedding dim of the weight, or
// its rows (the vocabulary: a Partial(sum) output); cross_entropy with reduction none shards the
// batch and spatial dims (sum and mean reduce those per-row losses: dtensor/cross_entropy.cpp;
// class-sharded logits under LossParallelGuard: dtensor/loss_parallel.cpp);
// scaled_dot_product_attention shards batch and head dims, or the query rows.

#include "tessera/dtensor/rules/rule_table.h"
#include "tessera/runtime/ops.h"

namespace tessera::dtensor {
namespace {

std::vector<Shape> same_as_input(const ShardingCall& call) { return {call.inputs[0].shape}; }

std::vector<ShardingStrategy> softmax_strategies(const ShardingCall& call) {
  std::vector<ShardingStrategy> list;
  const auto nd = static_cast<int64_t>(call.inputs[0].shape.size());
  for (int64_t e = 0; e < nd; ++e) {
    if (e != call.attrs.ints[0]) list.push_back({{Shard(e)}, {Shard(e)}});
  }
  return list;
}

// x, then weight (and bias) over the last attrs.ints[0] dims.
std::vector<ShardingStrategy> norm_strategies(const ShardingCall& call) {
  std::vector<ShardingStrategy> list;
  const auto nd = static_cast<int64_t>(call.inputs[0].shape.size());
  for (int64_t e = 0; e < nd - call.attrs.ints[0]; ++e) {
    ShardingStrategy s{{Shard(e)}, {Shard(e)}};
    s.inputs.resize(call.inputs.size(), Replicate());
    list.push_back(std::move(s));
  }
  return list;
}

// embedding(weight [V, D], indices [...]) -> [..., D]. Rows of the weight sharded: each rank
// looks up the indices it holds and gives zeros for the others (runtime/ops/nn.cpp), so the
// output is a Partial(sum) that reduces exactly (one non-zero part per element).
std::vector<ShardingStrategy> embedding_strategies(const ShardingCall& call) {
  std::vector<ShardingStrategy> list;
  const auto nd = static_cast<int64_t>(call.inputs[1].shape.size());
  for (int64_t e = 0; e < nd; ++e) list.push_back({{Shard(e)}, {Replicate(), Shard(e)}});
  list.push_back({{Shard(nd)}, {Shard(1), Replicate()}});
  list.push_back({{Partial(dist::ReduceOp::Sum)}, {Shard(0), Replicate()}});
  return list;
}

std::vector<Shape> embedding_shape(const ShardingCall& call) {
  Shape out = call.inputs[1].shape;
  out.push_back(call.inputs[0].shape[1]);
  return {out};
}

// cross_entropy(logits [N, C, d...] or [C], target [N, d...] or []), attrs {ignore_index,
// reduction}. Per-row losses (reduction none) are independent: logits dim 0 and the spatial dims
// k >= 2 pair with target dim 0 / k - 1 and the output's. A reduced loss is whole here; sharded
// inputs reach it through dtensor/cross_entropy.cpp, which reduces the per-row losses.
bool reduces(const ShardingCall& call) {
  return call.attrs.ints[1] != static_cast<int64_t>(Reduction::None);
}

std::vector<ShardingStrategy> cross_entropy_strategies(const ShardingCall& call) {
  std::vector<ShardingStrategy> list;
  const auto nd = static_cast<int64_t>(call.inputs[0].shape.size());
  if (reduces(call) || nd < 2) return list;
  list.push_back({{Shard(0)}, {Shard(0), Shard(0)}});
  for (int64_t k = 2; k < nd; ++k) list.push_back({{Shard(k - 1)}, {Shard(k), Shard(k - 1)}});
  return list;
}

std::vector<Shape> cross_entropy_shape(const ShardingCall& call) {
  return {reduces(call) ? Shape{} : call.inputs[1].shape};
}

// scaled_dot_product_attention(query [..., L, E], key [..., S, E], value [..., S, Ev],
// attn_mask broadcastable to [..., L, S]) -> [..., L, Ev]; attrs reals {dropout_p}, flag
// is_causal. A leading (batch or head) dim that query, key and value all have whole is
// independent: head-sharded attention (the tensor-parallel layout) and batch-sharded attention
// run with no collective; the mask follows where it has that dim, else stays Replicate. Query
// rows are independent too unless causal (the causal mask needs the global row index): query
// sharded on L with key and value whole, so sequence-sharded key/value are gathered (ring
// attention would avoid that; not here). With dropout_p > 0 the attention weights draw random
// numbers by local index: only Replicate keeps them equal to the single-device op's.
std::vector<ShardingStrategy> sdpa_strategies(const ShardingCall& call) {
  std::vector<ShardingStrategy> list;
  if (call.attrs.reals[0] > 0.0) return list;
  const Shape& q = call.inputs[0].shape;
  const Shape& k = call.inputs[1].shape;
  const Shape& v = call.inputs[2].shape;
  const bool has_mask = call.has_input(3);
  const auto nq = static_cast<int64_t>(q.size());
  // The mask's dim aligned (from the right) with query-shaped dim d, when it is not broadcast.
  auto mask_placement = [&](int64_t d, int64_t size) -> Placement {
    if (!has_mask) return Replicate();
    const Shape& m = call.inputs[3].shape;
    const int64_t md = d - (nq - static_cast<int64_t>(m.size()));
    return md >= 0 && m[static_cast<size_t>(md)] == size ? Placement(Shard(md)) : Replicate();
  };
  if (k.size() == q.size() && v.size() == q.size()) {
    for (int64_t d = 0; d < nq - 2; ++d) {
      const auto i = static_cast<size_t>(d);
      if (k[i] != q[i] || v[i] != q[i]) continue;
      list.push_back({{Shard(d)}, {Shard(d), Shard(d), Shard(d), mask_placement(d, q[i])}});
    }
  }
  if (!call.attrs.flag) {
    const int64_t l = nq - 2;
    list.push_back(
        {{Shard(l)},
         {Shard(l), Replicate(), Replicate(), mask_placement(l, q[static_cast<size_t>(l)])}});
  }
  return list;
}

std::vector<Shape> sdpa_shape(const ShardingCall& call) {
  Shape out = call.inputs[0].shape;
  out.back() = call.inputs[2].shape.back();
  return {out};
}

}  // namespace

void add_nn_rules(RuleTable& table) {
  table["softmax"] = OpRule{softmax_strategies, same_as_input, "", false};
  table["log_softmax"] = OpRule{softmax_strategies, same_as_input, "", false};
  table["layer_norm"] = OpRule{norm_strategies, same_as_input, "", false};
  table["rms_norm"] = OpRule{norm_strategies, same_as_input, "", false};
  table["embedding"] = OpRule{embedding_strategies, embedding_shape, "", false};
  table["cross_entropy"] = OpRule{cross_entropy_strategies, cross_entropy_shape, "", false};
  table["scaled_dot_product_attention"] = OpRule{sdpa_strategies, sdpa_shape, "", false};
}

}  // namespace tessera::dtensor
