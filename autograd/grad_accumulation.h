#pragma once
// Summing and copying gradients inside the engine and AccumulateGrad. Under create_graph (grad
// mode on) these record, through their own small Functions, so that a gradient summed from several
// paths, or stored as a leaf's .grad(), can be differentiated again whatever ops have formulas.

#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

// a + b (same shape and dtype); recorded when grad mode is on and either requires grad.
Tensor sum_gradients(const Tensor& a, const Tensor& b);
// Adds g to `sum`, a gradient buffer only the caller holds (the engine's slot of one node input):
// in place when nothing records and no other tensor shares sum's storage, as PyTorch's
// InputBuffer, which spares a fresh buffer per extra path; sum_gradients otherwise.
void accumulate_gradient(Tensor& sum, const Tensor& g);
// Whether accumulate_gradient adds into `sum` in place (given a g of its shape, dtype and
// device): nothing records, sum is contiguous, needs no gradient and shares its storage with no
// other tensor.
bool accumulates_in_place(const Tensor& sum);
// A copy of g in fresh contiguous storage; recorded like sum_gradients.
Tensor copy_gradient(const Tensor& g);

}  // namespace tessera::autograd
