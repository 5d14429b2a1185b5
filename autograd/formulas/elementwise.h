#pragma once
// The elementwise family's slots (runtime/ops/elementwise_grad.h), split over
// autograd/formulas/elementwise_{unary,binary,inplace}.cpp and installed by elementwise.cpp, and
// what their formulas share.

#include <optional>
#include <string>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/runtime/op_table.h"
#include "tessera/runtime/scalar.h"

namespace tessera::autograd {

// Each runs its entry point under NoGradGuard and records the op's backward node.
Tensor unary_with_grad(UnaryOp op, const Tensor& a);
Tensor gelu_with_grad(const Tensor& a, const std::string& approximate);
Tensor clamp_with_grad(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor binary_with_grad(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_scalar_with_grad(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first);
Tensor add_with_grad(const Tensor& a, const Tensor& b, const Scalar& alpha);
Tensor sub_with_grad(const Tensor& a, const Tensor& b, const Scalar& alpha);
Tensor where_with_grad(const Tensor& cond, const Tensor& a, const Tensor& b);
// In place, through record_inplace (autograd/formulas/inplace.h).
Tensor& binary_inplace_with_grad(BinaryOp op, Tensor& self, const Tensor& other);
Tensor& binary_scalar_inplace_with_grad(BinaryOp op, Tensor& self, const Scalar& s);

// The shape that an input's gradient is summed back to, kept only when the input was broadcast
// to the output's shape, so that same-shape ops save no shape at all.
class BroadcastInput {
 public:
  BroadcastInput() = default;
  BroadcastInput(const Tensor& input, const Tensor& output)
      : broadcast_(input.sizes() != output.sizes()) {
    if (broadcast_) shape_ = input.sizes();
  }
  // grad has the output's shape.
  Tensor reduce(const Tensor& grad) const { return broadcast_ ? sum_to(grad, shape_) : grad; }

 private:
  bool broadcast_ = false;
  Shape shape_;
};

// Whether a formula may compute its gradient with pointwise_backward (Note [Fused pointwise
// backward]): nothing it reads requires grad under grad mode (the result need not record) and
// every tensor is local. Undefined tensors allowed.
bool fused_applies(const Tensor& grad, const Tensor& x, const Tensor& y = {});

// A 0-dim zero of t's dtype: the "no gradient here" operand of where.
Tensor zero_of(const Tensor& t);

// -s, in s's category.
Scalar negated(const Scalar& s);

}  // namespace tessera::autograd
