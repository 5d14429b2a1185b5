#pragma once
// In-place ops under autograd (PyTorch's rules): an in-place write into a leaf that requires grad,
// or into a view of a tensor that requires grad, raises; into any other tensor, the write is
// recorded by computing the result out of place from a clone of the old value (so that formulas
// that need it keep it), copying it into self's storage (which bumps the version counter, so that
// nodes that saved the old value raise at backward), and giving self the result's history.
//
// Writes through views of non-leaves (PyTorch's CopySlices) are not supported: they raise
// NotSupportedError instead of silently losing the base's gradient.

#include <functional>

#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

// Errors of an in-place `op` on self when grad mode is on: self is a leaf that requires grad, or
// a view of a tensor that requires grad.
void check_inplace(const Tensor& self, const char* op);

// self = compute(old value of self), recorded as above. compute receives a recorded clone of
// self and must return a tensor of self's shape (any dtype castable to self's).
Tensor& record_inplace(Tensor& self, const char* op,
                       const std::function<Tensor(const Tensor&)>& compute);

}  // namespace tessera::autograd
