// dropout: the gradient is masked and scaled by the mask the forward drew.

#include <memory>
#include <tuple>
#include <vector>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/autograd/formulas/nn_formulas.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera::autograd {

namespace {

class NativeDropoutBackward final : public FormulaNode {
 public:
  NativeDropoutBackward() : FormulaNode("NativeDropoutBackward0") {}
  SavedTensor mask;  // 0 or 1 / (1 - p) per element

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {grads[0] * mask.unpack(*this)};
  }
  void release_variables() override { mask.release(); }
};

// Reached only in training mode with p > 0 (the identity cases return before the slot).
Tensor dropout_slot(const Tensor& a, double p, bool /*train*/, Generator* gen) {
  Tensor out;
  Tensor mask;
  {
    NoGradGuard no_grad;
    std::tie(out, mask) = detail::dropout_with_mask(a, p, gen);
  }
  auto node = std::make_shared<NativeDropoutBackward>();
  record(node, {a}, {&out});
  node->mask = SavedTensor(mask, false);
  return out;
}

}  // namespace

void install_dropout_grads(NnGradHooks& hooks) { hooks.dropout = dropout_slot; }

}  // namespace tessera::autograd
