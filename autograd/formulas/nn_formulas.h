#pragma once
// The nn family's formulas, one installer per file (autograd/formulas/nn_*.cpp), all called by
// install_grad_hooks(NnGradHooks&) in autograd/formulas/nn.cpp.

#include "tessera/runtime/ops/nn_grad.h"
#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

// Whether a formula may take its one-pass kernel (Note [Fused nn backward] in
// runtime/ops/nn_backward.cpp): nothing it reads needs recording (fused_applies) and x's device
// has the kernels. Undefined tensors allowed.
bool nn_fused_applies(const Tensor& grad, const Tensor& x, const Tensor& y = {});

void install_softmax_grads(NnGradHooks& hooks);    // nn_softmax.cpp
void install_norm_grads(NnGradHooks& hooks);       // nn_norm.cpp
void install_embedding_grads(NnGradHooks& hooks);  // nn_embedding.cpp
void install_loss_grads(NnGradHooks& hooks);       // nn_loss.cpp
void install_dropout_grads(NnGradHooks& hooks);    // nn_dropout.cpp

}  // namespace tessera::autograd
