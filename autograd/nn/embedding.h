#pragma once
// nn::Embedding (torch.nn.Embedding): a lookup table, weight [num_embeddings, embedding_dim].

#include <cstdint>

#include "tessera/autograd/nn/module.h"
#include "tessera/runtime/generator.h"
#include "tessera/runtime/tensor_options.h"

namespace tessera::nn {

class Embedding : public Module {
 public:
  // weight drawn from N(0, 1) with `gen` (the default generator when null), as PyTorch.
  // Errors: negative sizes.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions options = {},
            Generator* gen = nullptr);

  // Integer indices of any shape [*] -> [*, embedding_dim]. Errors (from embedding): a
  // non-integer index tensor, an index out of [0, num_embeddings).
  Tensor forward(const Tensor& indices) override;

  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

}  // namespace tessera::nn
