#pragma once
// The nn family's formulas, one installer per file (autograd/formulas/nn_*.cpp), all called by
// install_grad_hooks(NnGradHooks&) in autograd/formulas/nn.cpp.

#include "runtime/ops/nn_grad.h"

namespace tessera::autograd {

void install_softmax_grads(NnGradHooks& hooks);    // nn_softmax.cpp
void install_norm_grads(NnGradHooks& hooks);       // nn_norm.cpp
void install_embedding_grads(NnGradHooks& hooks);  // nn_embedding.cpp
void install_loss_grads(NnGradHooks& hooks);       // nn_loss.cpp
void install_dropout_grads(NnGradHooks& hooks);    // nn_dropout.cpp

}  // namespace tessera::autograd
