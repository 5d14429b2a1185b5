#pragma once
// The models tessera-shardbench trains, written once against Tensor: a decoder-only transformer
// (token embedding, pre-norm blocks of examples/transformer_block.h, final norm, vocabulary head,
// cross_entropy) and an MLP preset (regression, mean squared error), with their parameter counts
// and the tensor- and sequence-parallel plans of each.

#include <tessera/tessera.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessera::shardbench {

struct ModelConfig {
  std::string preset = "transformer";  // or "mlp"
  int64_t layers = 2;
  int64_t hidden = 256;
  int64_t heads = 8;
  int64_t seq = 64;
  int64_t batch = 8;
  int64_t vocab = 2048;
  DType dtype = kFloat32;
  // The attention (q, k, v) and MLP widths; 0: hidden and 4 x hidden. Narrower only in a
  // tensor-parallel rank's share (tensor_parallel_share).
  int64_t attention_width = 0;
  int64_t mlp_width = 0;
};

// ceil(a / b) for a >= 0, b > 0: the largest of b torch.chunk pieces (tensor-parallel rank 0's).
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t attention_width(const ModelConfig& c);
int64_t mlp_width(const ModelConfig& c);

// The parts of the model of which a tensor-parallel rank holds 1/t: the attention (heads and the
// q, k, v, o widths), the MLP's inner width, the vocabulary. The built-in TP and SP plans shard
// all three; an explicit plan may shard some.
struct ShardedParts {
  bool attention = true;
  bool mlp = true;
  bool vocab = true;
  auto operator<=>(const ShardedParts&) const = default;
};

// What one of t tensor-parallel ranks computes, as a model of its own: of the sharded parts,
// heads / t, the attention and MLP widths / t and vocab / t (rank 0's chunks, the largest) at
// the full hidden size, so that its one-device step repeats the norms, residuals and loss that
// every rank repeats.
ModelConfig tensor_parallel_share(const ModelConfig& c, int64_t t, ShardedParts parts = {});

// One step's data: the model input and the target, whole (every strategy takes its part).
struct Batch {
  Tensor input;
  Tensor target;
};

std::shared_ptr<nn::Module> make_model(const ModelConfig& c);
// Deterministic: the same batch for every strategy.
Batch make_batch(const ModelConfig& c);
// The loss of one step (mean over the rows the arguments hold).
Tensor loss_of(const ModelConfig& c, const Tensor& output, const Tensor& target);

int64_t parameter_count(const ModelConfig& c);
// One term of a training step's tensor memory on the thread that trains it: what it is, the
// flags that size it with their values ("--vocab 2048 x --hidden 256") and its bytes.
struct MemoryTerm {
  std::string what;
  std::string flags;
  double bytes = 0.0;
};

// The tensor memory one thread needs to train `c` with AdamW (Note [Memory of a step]), from the
// sizes make_model builds: one copy of the weights by group and the activations forward keeps
// for backward by kind, in double (the flags' ranges overflow int64 in products of four). With
// `replicas` > 1: one of that many replicas, each on batch / replicas sequences (at least one).
struct StepMemory {
  std::vector<MemoryTerm> weights;
  std::vector<MemoryTerm> activations;
  double weight_bytes() const;
  double activation_bytes() const;
  // The high-water mark: the weights and AdamW's two moments beside the activations, or the
  // gradients' fourth copy of the weights, whichever is more. A lower bound of the measured one
  // by up to ~30% (allocator rounding, the backward's and the update's temporaries).
  double peak_bytes() const;
};
StepMemory step_memory(const ModelConfig& c, int64_t replicas = 1);

// Floating-point operations of the matrix products (the linear layers', attention's) in one
// forward + backward of the whole batch.
double step_gemm_flops(const ModelConfig& c);

// Submodule paths -> styles on the "tp" mesh dim: Megatron's layout (vocabulary-sharded
// embedding, column/row-sharded attention and MLP, class-sharded head with loss parallel).
std::map<std::string, ParallelStyle> tensor_parallel_plan(const ModelConfig& c);
// The same with the norms and residuals on sequence shards.
std::map<std::string, ParallelStyle> sequence_parallel_plan(const ModelConfig& c);
// The dims sequence parallel shards the input and target on.
int64_t sequence_dim(const ModelConfig& c);
// The submodules fully_shard wraps one by one (then the root).
std::vector<std::string> fsdp_units(const ModelConfig& c);
// Whether the loss takes class-sharded logits (LossParallelGuard) under tensor parallel.
bool uses_loss_parallel(const ModelConfig& c);

}  // namespace tessera::shardbench
