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
};

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
// Multiply-adds x 2 of one forward (GEMMs and attention scores/values), for the whole batch.
double forward_flops(const ModelConfig& c);

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
