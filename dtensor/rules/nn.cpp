// Rules of the nn functions: softmax and log_softmax shard any dim but the normalized one;
// layer_norm and rms_norm any leading (not normalized) dim of the input, with weight and bias
// whole; embedding shards the indices (the output follows) or the embedding dim of the weight.
// cross_entropy, dropout and scaled_dot_product_attention are replicate-only until their
// rules and the placement-independent RNG land (issue 16).

#include "dtensor/rules/rule_table.h"

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

// embedding(weight [V, D], indices [...]) -> [..., D].
std::vector<ShardingStrategy> embedding_strategies(const ShardingCall& call) {
  std::vector<ShardingStrategy> list;
  const auto nd = static_cast<int64_t>(call.inputs[1].shape.size());
  for (int64_t e = 0; e < nd; ++e) list.push_back({{Shard(e)}, {Replicate(), Shard(e)}});
  list.push_back({{Shard(nd)}, {Shard(1), Replicate()}});
  return list;
}

std::vector<Shape> embedding_shape(const ShardingCall& call) {
  Shape out = call.inputs[1].shape;
  out.push_back(call.inputs[0].shape[1]);
  return {out};
}

OpRule replicate_only(const std::string& reason) { return OpRule{nullptr, nullptr, reason, false}; }

}  // namespace

void add_nn_rules(RuleTable& table) {
  table["softmax"] = OpRule{softmax_strategies, same_as_input, "", false};
  table["log_softmax"] = OpRule{softmax_strategies, same_as_input, "", false};
  table["layer_norm"] = OpRule{norm_strategies, same_as_input, "", false};
  table["rms_norm"] = OpRule{norm_strategies, same_as_input, "", false};
  table["embedding"] = OpRule{embedding_strategies, embedding_shape, "", false};
  table["cross_entropy"] =
      replicate_only("the loss over sharded logits needs its own rule (LossParallel, issue 16)");
  table["dropout"] = replicate_only(
      "its mask must not depend on the placements: the distributed RNG comes with issue 16");
  table["scaled_dot_product_attention"] =
      replicate_only("head- and batch-sharded attention rules come with issue 16");
}

}  // namespace tessera::dtensor
