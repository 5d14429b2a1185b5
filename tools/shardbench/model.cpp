#include "tools/shardbench/model.h"

#include "examples/transformer_block.h"

namespace tessera::shardbench {

namespace {

examples::BlockConfig block_config(const ModelConfig& c) {
  return {.model = c.hidden,
          .heads = c.heads,
          .hidden = mlp_width(c),
          .dtype = c.dtype,
          .attention = attention_width(c)};
}

// Token embedding -> blocks -> norm -> vocabulary head: logits [B, S, V].
class TransformerLM : public nn::Module {
 public:
  explicit TransformerLM(const ModelConfig& c) : Module("TransformerLM") {
    const TensorOptions o = c.dtype;
    embed_ = register_module("embed", std::make_shared<nn::Embedding>(c.vocab, c.hidden, o));
    blocks_ = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks_->push_back(std::make_shared<examples::TransformerBlock>(block_config(c)));
    }
    norm_ = register_module("norm",
                            std::make_shared<nn::LayerNorm>(Shape{c.hidden}, 1e-5, true, true, o));
    head_ = register_module("head", std::make_shared<nn::Linear>(c.hidden, c.vocab, false, o));
  }
  Tensor forward(const Tensor& ids) override {
    return (*head_)((*norm_)((*blocks_)((*embed_)(ids))));
  }

 private:
  std::shared_ptr<nn::Embedding> embed_;
  std::shared_ptr<nn::Sequential> blocks_;
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Linear> head_;
};

bool is_mlp(const ModelConfig& c) { return c.preset == "mlp"; }

// The MLP preset: one row per token, hidden -> mlp_width (4 hidden) -> hidden.
std::vector<int64_t> mlp_sizes(const ModelConfig& c) { return {c.hidden, mlp_width(c), c.hidden}; }

}  // namespace

int64_t attention_width(const ModelConfig& c) {
  return c.attention_width > 0 ? c.attention_width : c.hidden;
}

int64_t mlp_width(const ModelConfig& c) { return c.mlp_width > 0 ? c.mlp_width : 4 * c.hidden; }

ModelConfig tensor_parallel_share(const ModelConfig& c, int64_t t) {
  ModelConfig share = c;
  const int64_t heads = ceil_div(c.heads, t);
  share.attention_width = heads * (attention_width(c) / c.heads);
  share.heads = heads;
  share.mlp_width = ceil_div(mlp_width(c), t);
  share.vocab = ceil_div(c.vocab, t);
  return share;
}

std::shared_ptr<nn::Module> make_model(const ModelConfig& c) {
  manual_seed(1234);
  if (is_mlp(c)) {
    return std::make_shared<nn::MLP>(
        mlp_sizes(c),
        nn::MLPOptions{.activation = nn::Activation::GELU, .tensor_options = c.dtype});
  }
  return std::make_shared<TransformerLM>(c);
}

Batch make_batch(const ModelConfig& c) {
  Generator gen(4321);
  if (is_mlp(c)) {
    const int64_t rows = c.batch * c.seq;
    return {randn({rows, c.hidden}, c.dtype, &gen), randn({rows, c.hidden}, c.dtype, &gen)};
  }
  return {randint(0, c.vocab, {c.batch, c.seq}, kInt64, &gen),
          randint(0, c.vocab, {c.batch, c.seq}, kInt64, &gen)};
}

Tensor loss_of(const ModelConfig& c, const Tensor& output, const Tensor& target) {
  if (is_mlp(c)) {
    const Tensor d = output - target;
    return mean(d * d);
  }
  return cross_entropy(output.reshape({-1, c.vocab}), target.reshape({-1}));
}

int64_t parameter_count(const ModelConfig& c) {
  const int64_t h = c.hidden;
  const int64_t a = attention_width(c), f = mlp_width(c);
  if (is_mlp(c)) return (h * f + f) + (f * h + h);
  // Per block: 2 norms (weight, bias), q/k/v/o with bias, up and down with bias.
  const int64_t block = 2 * 2 * h + 3 * (h * a + a) + (a * h + h) + (h * f + f) + (f * h + h);
  return c.vocab * h + c.layers * block + 2 * h + h * c.vocab;
}

double step_gemm_flops(const ModelConfig& c) {
  const double tokens = static_cast<double>(c.batch * c.seq), h = static_cast<double>(c.hidden);
  const double a = static_cast<double>(attention_width(c)), f = static_cast<double>(mlp_width(c));
  // Forward multiply-adds; backward computes each product's input and weight gradients (twice
  // the forward's), except the MLP's first layer, whose input takes no gradient.
  if (is_mlp(c)) return 2.0 * tokens * (3.0 * 2.0 * h * f - h * f);
  // Per token: projections 4 h a, MLP 2 h f, attention's scores and values 2 s a (the causal
  // half computed whole), the head h V.
  const double per_token = static_cast<double>(c.layers) *
                               (4.0 * h * a + 2.0 * h * f + 2.0 * static_cast<double>(c.seq) * a) +
                           h * static_cast<double>(c.vocab);
  return 3.0 * 2.0 * tokens * per_token;
}

std::map<std::string, ParallelStyle> tensor_parallel_plan(const ModelConfig& c) {
  if (is_mlp(c)) return {{"0", ColwiseParallel{}}, {"2", RowwiseParallel{}}};
  std::map<std::string, ParallelStyle> plan{
      {"embed", RowwiseParallel{.input_layouts = Replicate()}},
      {"head", ColwiseParallel{.output_layouts = Shard(-1), .use_local_output = false}}};
  for (const auto& [name, style] : examples::block_tensor_parallel_plan()) {
    plan["blocks.*." + name] = style;
  }
  return plan;
}

std::map<std::string, ParallelStyle> sequence_parallel_plan(const ModelConfig& c) {
  if (is_mlp(c)) {
    return {{"0", ColwiseParallel{.input_layouts = Shard(0)}},
            {"2", RowwiseParallel{.output_layouts = Shard(0), .use_local_output = false}}};
  }
  std::map<std::string, ParallelStyle> plan{{"embed", RowwiseParallel{.input_layouts = Replicate(),
                                                                      .output_layouts = Shard(1),
                                                                      .use_local_output = false}},
                                            {"norm", SequenceParallel{}},
                                            {"head", ColwiseParallel{.input_layouts = Shard(1),
                                                                     .output_layouts = Shard(-1),
                                                                     .use_local_output = false}}};
  for (const auto& [name, style] : examples::block_sequence_parallel_plan()) {
    plan["blocks.*." + name] = style;
  }
  return plan;
}

int64_t sequence_dim(const ModelConfig& c) { return is_mlp(c) ? 0 : 1; }

std::vector<std::string> fsdp_units(const ModelConfig& c) {
  if (is_mlp(c)) return {"0", "2"};
  std::vector<std::string> units{"embed"};
  for (int64_t i = 0; i < c.layers; ++i) units.push_back("blocks." + std::to_string(i));
  units.push_back("head");
  return units;
}

bool uses_loss_parallel(const ModelConfig& c) { return !is_mlp(c); }

}  // namespace tessera::shardbench
