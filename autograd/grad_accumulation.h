#pragma once
// Summing and copying gradients inside the engine and AccumulateGrad. Under create_graph (grad
// mode on) these record, through their own small Functions, so that a gradient summed from several
// paths, or stored as a leaf's .grad(), can be differentiated again whatever ops have formulas.

#include "runtime/tensor.h"

namespace tessera::autograd {

// a + b (same shape and dtype); recorded when grad mode is on and either requires grad.
Tensor sum_gradients(const Tensor& a, const Tensor& b);
// A copy of g in fresh contiguous storage; recorded like sum_gradients.
Tensor copy_gradient(const Tensor& g);

}  // namespace tessera::autograd
