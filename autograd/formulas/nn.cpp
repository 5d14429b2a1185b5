#include "tessera/autograd/formulas/elementwise.h"
#include "tessera/autograd/formulas/nn_formulas.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera {

namespace autograd {

bool nn_fused_applies(const Tensor& grad, const Tensor& x, const Tensor& y) {
  return fused_applies(grad, x, y) && detail::has_fused_nn_backward(x);
}

}  // namespace autograd

void install_grad_hooks(NnGradHooks& hooks) {
  autograd::install_softmax_grads(hooks);
  autograd::install_norm_grads(hooks);
  autograd::install_embedding_grads(hooks);
  autograd::install_loss_grads(hooks);
  autograd::install_dropout_grads(hooks);
}

}  // namespace tessera
