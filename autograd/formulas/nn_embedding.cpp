// embedding and its backward (a scatter-add), each the other's gradient.

#include <memory>
#include <vector>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/autograd/formulas/nn_formulas.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera::autograd {

namespace {

class EmbeddingBackward final : public FormulaNode {
 public:
  explicit EmbeddingBackward(int64_t num_weights)
      : FormulaNode("EmbeddingBackward0"), num_weights_(num_weights) {}
  SavedTensor indices;

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {detail::embedding_backward(grads[0], indices.unpack(*this), num_weights_)};
  }
  void release_variables() override { indices.release(); }

 private:
  int64_t num_weights_;
};

// The scatter-add is linear in its gradient input: its own gradient gathers the same rows.
class EmbeddingDenseBackward final : public FormulaNode {
 public:
  EmbeddingDenseBackward() : FormulaNode("EmbeddingDenseBackward0") {}
  SavedTensor indices;

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {embedding(grads[0], indices.unpack(*this))};
  }
  void release_variables() override { indices.release(); }
};

Tensor embedding_slot(const Tensor& weight, const Tensor& indices) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = embedding(weight, indices);
  }
  auto node = std::make_shared<EmbeddingBackward>(weight.size(0));
  record(node, {weight}, {&out});
  node->indices = SavedTensor(indices, false);
  return out;
}

Tensor embedding_backward_slot(const Tensor& grad, const Tensor& indices, int64_t num_weights) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = detail::embedding_backward(grad, indices, num_weights);
  }
  auto node = std::make_shared<EmbeddingDenseBackward>();
  record(node, {grad}, {&out});
  node->indices = SavedTensor(indices, false);
  return out;
}

}  // namespace

void install_embedding_grads(NnGradHooks& hooks) {
  hooks.embedding = embedding_slot;
  hooks.embedding_backward = embedding_backward_slot;
}

}  // namespace tessera::autograd
