#include "tools/shardbench/model.h"

#include <algorithm>

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

ModelConfig tensor_parallel_share(const ModelConfig& c, int64_t t, ShardedParts parts) {
  ModelConfig share = c;
  if (parts.attention) {
    const int64_t heads = ceil_div(c.heads, t);
    share.attention_width = heads * (attention_width(c) / c.heads);
    share.heads = heads;
  }
  if (parts.mlp) share.mlp_width = ceil_div(mlp_width(c), t);
  if (parts.vocab) share.vocab = ceil_div(c.vocab, t);
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

// Note [Memory of a step]
// A thread training the model holds the weights, AdamW's two moments (in the weights' dtype, from
// the first step on) and the activations forward keeps for backward; backward frees activations
// as it makes the gradients, so the high-water mark is the larger of 3 weights + activations and
// 4 weights (with the gradients; AdamW's update then allocates a few parameter-sized
// temporaries, not counted). Activations, per token: per block the norms' inputs and outputs
// and the residuals (4 hidden), q, k, v and the merged heads (4 attention width), the MLP's up
// output and its GELU (2 MLP width) and the attention probabilities, kept whole (2 heads x seq);
// the logits and their softmax (2 vocab). The MLP preset keeps per row its input and target, the
// up output and its GELU, the output, the difference and its square: 2 MLP width + 6 hidden
// (counting the input rows 2 x). Against the allocator's high-water mark of one device's second
// step, MB (tessera-shardbench --strategies single --steps 1 --rounds 1, its peak MB; float32
// unless said): default 61 estimated against 62; vocab 32768 375 / 377; vocab 65536 batch 4
// 566 / 696 (the update's temporaries of the 67 MB head); 8 layers 181 / 182; seq 512 501 / 531;
// seq 256 batch 32 703 / 720; hidden 1024 470 / 504; float64 vocab 16384 415 / 418; MLP hidden
// 1024 134 / 172; MLP batch 64 x seq 256 241 / 270. The tools test's float64 model of hidden 16
// and seq 256, nearly all attention probabilities, reads 0.73 of its mark: the backward of the
// last block adds the probabilities' gradients on top of what forward kept.

namespace {

std::string flag(const char* name, int64_t value) {
  std::string s(name);
  s += ' ';
  s += std::to_string(value);
  return s;
}

// "--batch 8 x --seq 64": the flags a term is the product of.
std::string product(const std::vector<std::string>& flags) {
  std::string s;
  for (const std::string& f : flags) s += (s.empty() ? "" : " x ") + f;
  return s;
}

}  // namespace

double StepMemory::weight_bytes() const {
  double sum = 0.0;
  for (const MemoryTerm& t : weights) sum += t.bytes;
  return sum;
}

double StepMemory::activation_bytes() const {
  double sum = 0.0;
  for (const MemoryTerm& t : activations) sum += t.bytes;
  return sum;
}

double StepMemory::peak_bytes() const {
  return std::max(3.0 * weight_bytes() + activation_bytes(), 4.0 * weight_bytes());
}

StepMemory step_memory(const ModelConfig& c, int64_t replicas) {
  const int64_t sequences = std::max<int64_t>(1, c.batch / replicas);
  const double b = static_cast<double>(element_size(c.dtype));
  const double h = static_cast<double>(c.hidden), a = static_cast<double>(attention_width(c));
  const double f = static_cast<double>(mlp_width(c)), v = static_cast<double>(c.vocab);
  const double layers = static_cast<double>(c.layers), seq = static_cast<double>(c.seq);
  const double tokens = static_cast<double>(sequences) * seq;
  const std::string batch = replicas > 1
                                ? flag("--batch", c.batch) + " / " + flag("--ranks", replicas)
                                : flag("--batch", c.batch);
  const std::string hidden = flag("--hidden", c.hidden), seqs = flag("--seq", c.seq);
  StepMemory m;
  if (is_mlp(c)) {
    m.weights.push_back({"the MLP's weights", hidden, static_cast<double>(parameter_count(c)) * b});
    m.activations.push_back(
        {"the activations", product({batch, seqs, hidden}), tokens * (2.0 * f + 6.0 * h) * b});
    return m;
  }
  const double table = 2.0 * v * h;  // the embedding and the head
  m.weights.push_back(
      {"the embedding and the head", product({flag("--vocab", c.vocab), hidden}), table * b});
  m.weights.push_back({"the blocks' weights", product({flag("--layers", c.layers), hidden}),
                       (static_cast<double>(parameter_count(c)) - table) * b});
  m.activations.push_back(
      {"the logits", product({batch, seqs, flag("--vocab", c.vocab)}), 2.0 * tokens * v * b});
  m.activations.push_back(
      {"the attention probabilities",
       product({flag("--layers", c.layers), batch, flag("--heads", c.heads), seqs + " squared"}),
       layers * tokens * 2.0 * static_cast<double>(c.heads) * seq * b});
  m.activations.push_back({"the blocks' other activations",
                           product({flag("--layers", c.layers), batch, seqs, hidden}),
                           layers * tokens * (4.0 * h + 4.0 * a + 2.0 * f) * b});
  return m;
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
