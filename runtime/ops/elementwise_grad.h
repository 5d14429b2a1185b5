#pragma once
// The elementwise family's autograd slots (see Note [Recording ops for autograd] in
// runtime/autograd_hooks.h). Each slot has the signature of the entry point that calls it; the
// formulas live in autograd/formulas/elementwise*.cpp.
//
// Comparisons and logical ops (kBool results) never reach a slot: they are not differentiable.
// Their in-place forms (binary_) do, so that the tensor written into gets a history with zero
// gradients instead of keeping its old one.

#include <optional>
#include <string>

#include "tessera/runtime/op_table.h"
#include "tessera/runtime/scalar.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

struct ElementwiseGradHooks {
  Tensor (*unary)(UnaryOp op, const Tensor& a) = nullptr;
  // gelu(a, "tanh"), which the runtime composes from other ops; "none" goes through `unary`.
  Tensor (*gelu)(const Tensor& a, const std::string& approximate) = nullptr;
  Tensor (*binary)(BinaryOp op, const Tensor& a, const Tensor& b) = nullptr;
  // op(a, s), or op(s, a) when scalar_first (detail::binary_scalar).
  Tensor (*binary_scalar)(BinaryOp op, const Tensor& a, const Scalar& s,
                          bool scalar_first) = nullptr;
  Tensor (*add)(const Tensor& a, const Tensor& b, const Scalar& alpha) = nullptr;
  Tensor (*sub)(const Tensor& a, const Tensor& b, const Scalar& alpha) = nullptr;
  Tensor (*where)(const Tensor& cond, const Tensor& a, const Tensor& b) = nullptr;
  Tensor (*clamp)(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) = nullptr;
  // In place, after the arguments were validated (dtypes, shapes, devices).
  Tensor& (*binary_)(BinaryOp op, Tensor& self, const Tensor& other) = nullptr;
  Tensor& (*binary_scalar_)(BinaryOp op, Tensor& self, const Scalar& s) = nullptr;
};

void install_grad_hooks(ElementwiseGradHooks& hooks);

// The gradient of one input of a pointwise op in one kernel pass (Note [Fused pointwise backward]
// in runtime/ops/elementwise_backward.cpp; PointwiseGradOp in runtime/op_table.h says what x, y,
// p0 and p1 are). grad, x and y (undefined for one-operand ops) broadcast together; the result
// has the broadcast shape and the dtype grad * x * y would have (torch.result_type), on their
// common device. Records nothing: autograd formulas call it when no operand requires grad.
// Errors: a non-floating result dtype, shapes that do not broadcast, devices that differ,
// distributed operands (backward formulas run on local tensors).
Tensor pointwise_backward(PointwiseGradOp op, const Tensor& grad, const Tensor& x,
                          const Tensor& y = {}, double p0 = 0, double p1 = 0);
// As pointwise_backward, but the result may be written over grad, the caller's only reference to
// a gradient it reads here for the last time (Note [Reusing the incoming gradient]): when grad is
// contiguous, of the result's shape and dtype, and no other tensor shares its storage.
Tensor pointwise_backward_reusing_grad(PointwiseGradOp op, Tensor&& grad, const Tensor& x,
                                       const Tensor& y = {}, double p0 = 0, double p1 = 0);
// Whether grad, a backward formula's only reference to its incoming gradient, may be written over
// with a result of `shape` and `dtype` (Note [Reusing the incoming gradient]): contiguous, of that
// shape and dtype, not requiring grad, and no other tensor sharing its impl or storage.
bool gradient_reusable(const Tensor& grad, const Shape& shape, DType dtype);

namespace detail {
// The entry point behind every tensor-scalar operator and op: op(a, s), or op(s, a) when
// scalar_first, with s taking part in promotion as a Python number.
Tensor binary_scalar(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first);
}  // namespace detail

}  // namespace tessera
