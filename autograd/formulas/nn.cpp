#include "autograd/formulas/nn_formulas.h"

namespace tessera {

void install_grad_hooks(NnGradHooks& hooks) {
  autograd::install_softmax_grads(hooks);
  autograd::install_norm_grads(hooks);
  autograd::install_embedding_grads(hooks);
  autograd::install_loss_grads(hooks);
  autograd::install_dropout_grads(hooks);
}

}  // namespace tessera
