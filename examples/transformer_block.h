#pragma once
// A pre-norm transformer block (causal attention + GELU MLP, residuals) written once against
// Tensor, and the tensor- and sequence-parallel plans for it (Megatron's layout, PyTorch's
// parallel styles): the strategies test trains it under every strategy and
// bench/strategies_bench times it.

#include <tessera/tessera.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace examples {

namespace ts = tessera;

struct BlockConfig {
  int64_t model = 8;
  int64_t heads = 4;
  int64_t hidden = 16;
  ts::DType dtype = ts::kFloat64;
  // Width of q, k, v (heads x head dim) and of wo's input; 0: `model`. A tensor-parallel rank's
  // share of a block is a block of its own with heads / t and attention / t (the shardbench
  // calibration times it so).
  int64_t attention = 0;
  int64_t attention_width() const { return attention > 0 ? attention : model; }
};

// ln1 -> q, k, v -> causal attention -> wo (+ residual) -> ln2 -> up -> gelu -> down (+ residual).
// Views take the sizes of the tensors they get (global sizes on DTensors), so the same forward
// runs on one device and sharded.
class TransformerBlock : public ts::nn::Module {
 public:
  explicit TransformerBlock(BlockConfig c) : Module("TransformerBlock"), c_(c) {
    const ts::TensorOptions o = c.dtype;
    ln1_ = register_module(
        "ln1", std::make_shared<ts::nn::LayerNorm>(ts::Shape{c.model}, 1e-5, true, true, o));
    const int64_t width = c.attention_width();
    for (const char* name : {"wq", "wk", "wv"}) {
      proj_[name] =
          register_module(name, std::make_shared<ts::nn::Linear>(c.model, width, true, o));
    }
    proj_["wo"] = register_module("wo", std::make_shared<ts::nn::Linear>(width, c.model, true, o));
    ln2_ = register_module(
        "ln2", std::make_shared<ts::nn::LayerNorm>(ts::Shape{c.model}, 1e-5, true, true, o));
    up_ = register_module("up", std::make_shared<ts::nn::Linear>(c.model, c.hidden, true, o));
    down_ = register_module("down", std::make_shared<ts::nn::Linear>(c.hidden, c.model, true, o));
  }

  ts::Tensor forward(const ts::Tensor& x) override {
    const ts::Tensor h = (*ln1_)(x);
    const ts::Tensor q = heads((*proj_["wq"])(h));
    const ts::Tensor k = heads((*proj_["wk"])(h));
    const ts::Tensor v = heads((*proj_["wv"])(h));
    const ts::Tensor a = ts::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    const ts::Tensor merged =
        a.transpose(1, 2).reshape({a.size(0), a.size(2), c_.attention_width()});
    const ts::Tensor x1 = x + (*proj_["wo"])(merged);
    return x1 + (*down_)(ts::gelu((*up_)((*ln2_)(x1))));
  }

  // The modules holding parameters, for fully_shard one by one.
  static std::vector<std::string> parameter_modules() {
    return {"ln1", "wq", "wk", "wv", "wo", "ln2", "up", "down"};
  }

 private:
  // [B, S, A] -> [B, H, S, A / H].
  ts::Tensor heads(const ts::Tensor& t) const {
    return t.view({t.size(0), t.size(1), c_.heads, c_.attention_width() / c_.heads})
        .transpose(1, 2);
  }

  BlockConfig c_;
  std::shared_ptr<ts::nn::LayerNorm> ln1_, ln2_;
  std::map<std::string, std::shared_ptr<ts::nn::Linear>> proj_;
  std::shared_ptr<ts::nn::Linear> up_, down_;
};

// Tensor parallel: q, k, v and up column-sharded (kept DTensors so that the views by head see
// global sizes: attention runs on the rank's heads), wo and down row-sharded (their Partial
// outputs all_reduced).
inline std::map<std::string, ts::ParallelStyle> block_tensor_parallel_plan() {
  const ts::ColwiseParallel colwise{.use_local_output = false};
  return {{"wq", colwise}, {"wk", colwise},
          {"wv", colwise}, {"wo", ts::RowwiseParallel{}},
          {"up", colwise}, {"down", ts::RowwiseParallel{}}};
}

// Sequence parallel (with tensor parallel): the norms and residuals on sequence shards (dim 1),
// each Colwise input all_gathered, each Rowwise output reduce_scattered back to them.
inline std::map<std::string, ts::ParallelStyle> block_sequence_parallel_plan() {
  const ts::ColwiseParallel colwise{.input_layouts = ts::Shard(1), .use_local_output = false};
  const ts::RowwiseParallel rowwise{.output_layouts = ts::Shard(1), .use_local_output = false};
  return {{"ln1", ts::SequenceParallel{}},
          {"wq", colwise},
          {"wk", colwise},
          {"wv", colwise},
          {"wo", rowwise},
          {"ln2", ts::SequenceParallel{}},
          {"up", colwise},
          {"down", rowwise}};
}

}  // namespace examples
