// cross_entropy over class indices, with ignore_index, label smoothing and reductions.

#include <memory>
#include <vector>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/autograd/formulas/nn_formulas.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera::autograd {

namespace {

// One node for log_softmax and the nll loss together: with p = softmax(logits) along the class
// dim and q the smoothed one-hot target ((1 - ls) at the target class, plus ls / C everywhere),
// d loss / d logits = (p - q) * coef, where coef is the sample's incoming gradient scaled by the
// reduction (1 / #counted targets for Mean), and 0 for ignored samples. Built from public ops
// (softmax records again), so that second derivatives work, unless nothing needs recording: then
// one kernel pass (Note [Fused nn backward]). Named after the node PyTorch's cross_entropy
// returns.
class NllLossBackward final : public FormulaNode {
 public:
  explicit NllLossBackward(CrossEntropyOptions options)
      : FormulaNode("NllLossBackward0"), options_(options) {}
  SavedTensor logits, target;

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor()};
    const Tensor x = logits.unpack(*this);
    if (nn_fused_applies(g, x)) {
      return {detail::cross_entropy_backward(g, x, target.unpack(*this), options_)};
    }
    const int64_t cdim = x.dim() == 1 ? 0 : 1;
    const int64_t c = x.size(cdim);
    // target with a class dim of size 1, so that it broadcasts against x.
    const Tensor t = target.unpack(*this).unsqueeze(cdim);
    Shape class_shape(static_cast<size_t>(x.dim()), 1);
    class_shape[cdim] = c;
    const Tensor classes = arange(0, c, 1, kInt64, x.device()).reshape(class_shape);
    const Tensor onehot = eq(classes, t).to(x.dtype());
    const double ls = options_.label_smoothing;
    const Tensor q = ls > 0 ? onehot * (1.0 - ls) + ls / static_cast<double>(c) : onehot;

    const Tensor counted = ne(t, full({}, options_.ignore_index, kInt64)).to(x.dtype());
    double scale = 1.0;
    if (options_.reduction == Reduction::Mean) {
      // No counted target: the forward is nan, and no logit gets a gradient (as PyTorch).
      const double n = sum(counted).item<double>();
      scale = n > 0 ? 1.0 / n : 0.0;
    }
    const Tensor per_sample =
        options_.reduction == Reduction::None && g.dim() > 0 ? g.unsqueeze(cdim) : g;
    const Tensor coef = counted * scale * per_sample;
    return {(softmax(x, cdim) - q) * coef};
  }
  void release_variables() override {
    logits.release();
    target.release();
  }

 private:
  CrossEntropyOptions options_;
};

Tensor cross_entropy_slot(const Tensor& logits, const Tensor& target, CrossEntropyOptions options) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = cross_entropy(logits, target, options);
  }
  auto node = std::make_shared<NllLossBackward>(options);
  record(node, {logits}, {&out});
  node->logits = SavedTensor(logits, false);
  node->target = SavedTensor(target, false);
  return out;
}

}  // namespace

void install_loss_grads(NnGradHooks& hooks) { hooks.cross_entropy = cross_entropy_slot; }

}  // namespace tessera::autograd
