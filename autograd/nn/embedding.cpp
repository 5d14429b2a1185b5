#include "tessera/autograd/nn/embedding.h"

#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions options,
                     Generator* gen)
    : Module("Embedding") {
  TS_CHECK_SHAPE(num_embeddings >= 0 && embedding_dim >= 0,
                 "[Embedding] num_embeddings and embedding_dim must be >= 0, got ", num_embeddings,
                 " and ", embedding_dim);
  NoGradGuard no_grad;
  weight_ = register_parameter(
      "weight", randn({num_embeddings, embedding_dim}, options.requires_grad(false), gen));
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(parameter("weight"), indices); }

}  // namespace tessera::nn
