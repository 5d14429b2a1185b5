// The in-place binary ops (binary_op_, Tensor::operator+= ...) under autograd: self = op(self,
// other) computed out of place from self's old value and recorded (see inplace.h). Reached only
// when grad mode is on and self or other requires grad; the plain path stays in the runtime.
// In-place comparisons record too (zero gradients), so that self does not keep a stale history.

#include <memory>
#include <vector>

#include "tessera/autograd/formulas/elementwise.h"
#include "tessera/autograd/formulas/inplace.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"

namespace tessera::autograd {

namespace {

// The in-place op's name in errors, e.g. "add_".
const char* inplace_name(BinaryOp op) {
  switch (op) {
#define TS_CASE(e, name, kind) \
  case BinaryOp::e:            \
    return name "_";
    TS_FOR_EACH_BINARY_OP(TS_CASE)
#undef TS_CASE
  }
  return "binary_op_";
}

// The comparisons' in-place forms (eq_, ..., logical_or_ with a Tensor other) as PyTorch names
// their nodes; null for arithmetic ops.
const char* comparison_backward_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEq:
      return "EqBackward1";
    case BinaryOp::kNe:
      return "NeBackward1";
    case BinaryOp::kLt:
      return "LtBackward1";
    case BinaryOp::kLe:
      return "LeBackward1";
    case BinaryOp::kGt:
      return "GtBackward1";
    case BinaryOp::kGe:
      return "GeBackward1";
    case BinaryOp::kLogicalAnd:
      return "LogicalAndBackward0";
    case BinaryOp::kLogicalOr:
      return "LogicalOrBackward0";
    default:
      return nullptr;
  }
}

// A comparison written into a tensor that requires grad: the 0/1 result does not depend
// differentiably on either operand, so both get zeros (PyTorch's formula for eq_ and the like).
class ComparisonBackward final : public FormulaNode {
 public:
  explicit ComparisonBackward(const char* name) : FormulaNode(name) {}
  BroadcastInput other_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const Tensor zeros = zeros_like(grads[0]);
    return {needs_input_grad(0) ? zeros : Tensor(),
            needs_input_grad(1) ? other_shape.reduce(zeros) : Tensor()};
  }
};

// op(old, other) in old's dtype, recorded with a ComparisonBackward so that self's new history
// gives zero gradients.
Tensor recorded_comparison(BinaryOp op, const char* name, const Tensor& old, const Tensor& other) {
  Tensor result;
  {
    NoGradGuard no_grad;
    result = binary_op(op, old, other).to(old.dtype());
  }
  auto node = std::make_shared<ComparisonBackward>(name);
  record(node, {old, other}, {&result});
  node->other_shape = BroadcastInput(other, result);
  return result;
}

}  // namespace

Tensor& binary_inplace_with_grad(BinaryOp op, Tensor& self, const Tensor& other) {
  if (const char* name = comparison_backward_name(op)) {
    return record_inplace(self, inplace_name(op), [&](const Tensor& old) {
      return recorded_comparison(op, name, old, other);
    });
  }
  return record_inplace(self, inplace_name(op),
                        [&](const Tensor& old) { return binary_op(op, old, other); });
}

Tensor& binary_scalar_inplace_with_grad(BinaryOp op, Tensor& self, const Scalar& s) {
  return record_inplace(self, inplace_name(op), [&](const Tensor& old) {
    return detail::binary_scalar(op, old, s, /*scalar_first=*/false);
  });
}

}  // namespace tessera::autograd
