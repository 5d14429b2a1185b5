// Backward formulas of the binary elementwise ops (tensor-tensor, tensor-scalar, scalar-tensor) and
// where, as PyTorch's derivatives.yaml. Broadcast inputs get their gradient summed back with
// sum_to; each node saves only what the gradients that are needed read. Gradients that take more
// than one runtime op are one fused kernel unless they must record (Note [Fused pointwise
// backward] in runtime/ops/elementwise_backward.cpp).

#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "tessera/autograd/formulas/elementwise.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"

namespace tessera::autograd {

namespace {

// add / sub (AddBackward0 / SubBackward0): a + alpha * b, or a - alpha * b; saves no tensor.
class AddBackward final : public FormulaNode {
 public:
  AddBackward(const char* name, const Scalar& b_scale) : FormulaNode(name), b_scale_(b_scale) {}
  BroadcastInput a_shape, b_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor(), Tensor()};
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = a_shape.reduce(grad);
    if (needs_input_grad(1)) gb = b_shape.reduce(scaled(grad));
    return {std::move(ga), std::move(gb)};
  }

 private:
  Tensor scaled(const Tensor& grad) const {
    if (b_scale_.to_double() == 1.0) return grad;
    if (b_scale_.to_double() == -1.0) return neg(grad);
    return mul(grad, b_scale_);
  }
  Scalar b_scale_;
};

class MulBackward final : public FormulaNode {
 public:
  MulBackward() : FormulaNode("MulBackward0") {}
  SavedTensor a, b;  // b only for a's gradient, a only for b's
  BroadcastInput a_shape, b_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor(), Tensor()};
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = a_shape.reduce(grad * b.unpack(*this));
    if (needs_input_grad(1)) gb = b_shape.reduce(grad * a.unpack(*this));
    return {std::move(ga), std::move(gb)};
  }
  void release_variables() override {
    a.release();
    b.release();
  }
};

class DivBackward final : public FormulaNode {
 public:
  DivBackward() : FormulaNode("DivBackward0") {}
  SavedTensor a, b;  // a only for b's gradient
  BroadcastInput a_shape, b_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor(), Tensor()};
    const Tensor other = b.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = a_shape.reduce(grad / other);
    if (needs_input_grad(1)) {
      const Tensor x = a.unpack(*this);
      gb = b_shape.reduce(
          fused_applies(grad, x, other)
              ? pointwise_backward(PointwiseGradOp::kDivOtherBackward, grad, x, other)
              : neg(grad) * x / (other * other));
    }
    return {std::move(ga), std::move(gb)};
  }
  void release_variables() override {
    a.release();
    b.release();
  }
};

// grad * d(a^b)/db = grad * a^b log(a), taken as 0 where a == 0 and b >= 0 (PyTorch's
// pow_backward_exponent: keeps the gradients of 0^0 and 0^b finite). base_is_zero: a == 0.
Tensor exponent_grad(const Tensor& grad, const Tensor& result, const Tensor& log_base,
                     const Tensor& base_is_zero, const Tensor& exponent) {
  const Tensor g = grad * (result * log_base);
  return where(logical_and(base_is_zero, exponent >= 0), zero_of(g), g);
}

// pow(Tensor, Tensor): PowBackward1.
class PowBackward final : public FormulaNode {
 public:
  PowBackward() : FormulaNode("PowBackward1") {}
  SavedTensor self, exponent, result;  // result only for the exponent's gradient
  BroadcastInput self_shape, exponent_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor(), Tensor()};
    const Tensor a = self.unpack(*this);
    const Tensor b = exponent.unpack(*this);
    Tensor ga, gb;
    if (fused_applies(grad, a, b)) {
      if (needs_input_grad(0)) {
        ga = self_shape.reduce(pointwise_backward(PointwiseGradOp::kPowSelfBackward, grad, a, b));
      }
      if (needs_input_grad(1)) {
        gb = exponent_shape.reduce(
            pointwise_backward(PointwiseGradOp::kPowExponentBackward, grad, a, b));
      }
      return {std::move(ga), std::move(gb)};
    }
    if (needs_input_grad(0)) {
      // pow_backward_self: 0 where the exponent is 0 (d/da a^0 = 0, even at a = 0).
      ga = self_shape.reduce(where(b == 0, zero_of(grad), grad * (b * pow(a, b - 1))));
    }
    if (needs_input_grad(1)) {
      gb = exponent_shape.reduce(exponent_grad(grad, result.unpack(*this), log(a), a == 0, b));
    }
    return {std::move(ga), std::move(gb)};
  }
  void release_variables() override {
    self.release();
    exponent.release();
    result.release();
  }
};

// maximum / minimum: the winner gets the gradient, ties split it in half (as PyTorch).
class MaxMinBackward final : public FormulaNode {
 public:
  explicit MaxMinBackward(bool is_max)
      : FormulaNode(is_max ? "MaximumBackward0" : "MinimumBackward0"), max_(is_max) {}
  SavedTensor a, b;
  BroadcastInput a_shape, b_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor(), Tensor()};
    const Tensor x = a.unpack(*this);
    const Tensor y = b.unpack(*this);
    const Tensor shared = where(x == y, mul(grad, 0.5), grad);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = a_shape.reduce(where(loses(x, y), zero_of(grad), shared));
    if (needs_input_grad(1)) gb = b_shape.reduce(where(loses(y, x), zero_of(grad), shared));
    return {std::move(ga), std::move(gb)};
  }
  void release_variables() override {
    a.release();
    b.release();
  }

 private:
  Tensor loses(const Tensor& self, const Tensor& other) const {
    return max_ ? self < other : self > other;
  }
  bool max_;
};

class WhereBackward final : public FormulaNode {
 public:
  WhereBackward() : FormulaNode("WhereBackward0") {}
  SavedTensor condition;
  BroadcastInput a_shape, b_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor(), Tensor()};
    const Tensor cond = condition.unpack(*this);
    Tensor ga, gb;
    if (needs_input_grad(0)) ga = a_shape.reduce(where(cond, grad, zero_of(grad)));
    if (needs_input_grad(1)) gb = b_shape.reduce(where(cond, zero_of(grad), grad));
    return {std::move(ga), std::move(gb)};
  }
  void release_variables() override { condition.release(); }
};

// Names as ATen's: at::op(Tensor, Scalar) is the op's Scalar overload (AddBackward1, ...,
// PowBackward0); Scalar-op-Tensor wraps the scalar into a tensor (AddBackward0, ...,
// PowBackward2 for pow(Scalar, Tensor)).
const char* scalar_backward_name(BinaryOp op, bool scalar_first) {
  switch (op) {
    case BinaryOp::kAdd:
      return scalar_first ? "AddBackward0" : "AddBackward1";
    case BinaryOp::kSub:
      return scalar_first ? "SubBackward0" : "SubBackward1";
    case BinaryOp::kMul:
      return scalar_first ? "MulBackward0" : "MulBackward1";
    case BinaryOp::kDiv:
      return scalar_first ? "DivBackward0" : "DivBackward1";
    case BinaryOp::kPow:
      return scalar_first ? "PowBackward2" : "PowBackward0";
    default:
      break;
  }
  TS_INTERNAL_ASSERT(false, "[", op_name(op), "] has no tensor-scalar backward formula");
  return "";
}

// grad * s or grad / s (op), written over grad where the formula holds the only reference to it
// and the product keeps grad's dtype (Note [Reusing the incoming gradient]): attention's scale
// is a 1 MiB gradient per step of a transformer block.
Tensor scaled_gradient(Tensor&& grad, BinaryOp op, const Scalar& s) {
  if (is_floating_point(grad.dtype()) && gradient_reusable(grad, grad.sizes(), grad.dtype())) {
    Tensor out = std::move(grad);
    return op == BinaryOp::kMul ? (out *= s) : (out /= s);
  }
  return op == BinaryOp::kMul ? mul(grad, s) : div(grad, s);
}

// op(a, s), or op(s, a) when scalar_first. Saves, per binary_scalar_with_grad: a for s / a and
// a^s (and for 0^a), the result for s^a.
class ScalarBinaryBackward final : public FormulaNode {
 public:
  ScalarBinaryBackward(BinaryOp op, const Scalar& s, bool scalar_first)
      : FormulaNode(scalar_backward_name(op, scalar_first)),
        op_(op),
        s_(s),
        scalar_first_(scalar_first) {}
  SavedTensor input, result;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor()};
    switch (op_) {
      case BinaryOp::kAdd:
        return {grad};
      case BinaryOp::kSub:
        return {scalar_first_ ? neg(grad) : grad};
      case BinaryOp::kMul:
        return {scaled_gradient(std::move(grads[0]), BinaryOp::kMul, s_)};
      case BinaryOp::kDiv: {
        if (!scalar_first_) return {scaled_gradient(std::move(grads[0]), BinaryOp::kDiv, s_)};
        const Tensor a = input.unpack(*this);  // d(s/a)/da = -s / a^2
        if (fused_applies(grad, a)) {
          return {pointwise_backward(PointwiseGradOp::kRdivBackward, grad, a, {}, s_.to_double())};
        }
        return {mul(grad / (a * a), negated(s_))};
      }
      case BinaryOp::kPow:
        return {scalar_first_ ? scalar_base_grad(grad) : scalar_exponent_grad(grad)};
      default:
        break;
    }
    TS_INTERNAL_ASSERT(false, "[", op_name(op_), "] has no tensor-scalar backward formula");
    return {Tensor()};
  }
  void release_variables() override {
    input.release();
    result.release();
  }

 private:
  // pow(a, s): s * a^(s-1), and zeros for s == 0.
  Tensor scalar_exponent_grad(const Tensor& grad) const {
    if (s_.to_double() == 0.0) return zeros_like(grad);
    const Tensor a = input.unpack(*this);
    if (fused_applies(grad, a)) {
      return pointwise_backward(PointwiseGradOp::kPowScalarBackward, grad, a, {}, s_.to_double());
    }
    const Scalar s_minus_1 =
        s_.is_floating_point() ? Scalar(s_.to_double() - 1.0) : Scalar(s_.to_int64() - 1);
    return grad * mul(pow(a, s_minus_1), s_);
  }
  // pow(s, a): s^a log(s); input is saved only for s == 0.
  Tensor scalar_base_grad(const Tensor& grad) const {
    const Tensor out = result.unpack(*this);
    const double base = s_.to_double();
    if (base != 0.0) {
      if (fused_applies(grad, out)) {
        return pointwise_backward(PointwiseGradOp::kRpowBackward, grad, out, {}, std::log(base));
      }
      return grad * mul(out, std::log(base));
    }
    const Tensor g = grad * mul(out, -std::numeric_limits<double>::infinity());  // log(0)
    return where(input.unpack(*this) >= 0, zero_of(g), g);
  }

  BinaryOp op_;
  Scalar s_;
  bool scalar_first_;
};

// Records out = a + b_scale * b as a node named `name` (sub: b_scale = -alpha).
void record_add(const char* name, const Tensor& a, const Tensor& b, const Scalar& b_scale,
                const Tensor& out) {
  auto node = std::make_shared<AddBackward>(name, b_scale);
  record(node, {a, b}, {&out});
  node->a_shape = BroadcastInput(a, out);
  node->b_shape = BroadcastInput(b, out);
}

}  // namespace

Tensor binary_with_grad(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = binary_op(op, a, b);
  }
  switch (op) {
    case BinaryOp::kAdd:
      record_add("AddBackward0", a, b, 1, out);
      break;
    case BinaryOp::kSub:
      record_add("SubBackward0", a, b, -1, out);
      break;
    case BinaryOp::kMul: {
      auto node = std::make_shared<MulBackward>();
      record(node, {a, b}, {&out});
      if (node->needs_input_grad(0)) node->b = SavedTensor(b, false);
      if (node->needs_input_grad(1)) node->a = SavedTensor(a, false);
      node->a_shape = BroadcastInput(a, out);
      node->b_shape = BroadcastInput(b, out);
      break;
    }
    case BinaryOp::kDiv: {
      auto node = std::make_shared<DivBackward>();
      record(node, {a, b}, {&out});
      node->b = SavedTensor(b, false);
      if (node->needs_input_grad(1)) node->a = SavedTensor(a, false);
      node->a_shape = BroadcastInput(a, out);
      node->b_shape = BroadcastInput(b, out);
      break;
    }
    case BinaryOp::kPow: {
      auto node = std::make_shared<PowBackward>();
      record(node, {a, b}, {&out});
      node->self = SavedTensor(a, false);
      node->exponent = SavedTensor(b, false);
      if (node->needs_input_grad(1)) node->result = SavedTensor(out, true);
      node->self_shape = BroadcastInput(a, out);
      node->exponent_shape = BroadcastInput(b, out);
      break;
    }
    case BinaryOp::kMaximum:
    case BinaryOp::kMinimum: {
      auto node = std::make_shared<MaxMinBackward>(op == BinaryOp::kMaximum);
      record(node, {a, b}, {&out});
      node->a = SavedTensor(a, false);
      node->b = SavedTensor(b, false);
      node->a_shape = BroadcastInput(a, out);
      node->b_shape = BroadcastInput(b, out);
      break;
    }
    default:
      TS_INTERNAL_ASSERT(false, "[", op_name(op), "] has no backward formula");
  }
  return out;
}

Tensor add_with_grad(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = add(a, b, alpha);
  }
  record_add("AddBackward0", a, b, alpha, out);
  return out;
}

Tensor sub_with_grad(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = sub(a, b, alpha);
  }
  record_add("SubBackward0", a, b, negated(alpha), out);
  return out;
}

Tensor binary_scalar_with_grad(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = detail::binary_scalar(op, a, s, scalar_first);
  }
  auto node = std::make_shared<ScalarBinaryBackward>(op, s, scalar_first);
  record(node, {a}, {&out});
  if (op == BinaryOp::kDiv && scalar_first) node->input = SavedTensor(a, false);
  if (op == BinaryOp::kPow) {
    if (!scalar_first || s.to_double() == 0.0) node->input = SavedTensor(a, false);
    if (scalar_first) node->result = SavedTensor(out, true);
  }
  return out;
}

Tensor where_with_grad(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = where(cond, a, b);
  }
  auto node = std::make_shared<WhereBackward>();
  record(node, {a, b}, {&out});
  node->condition = SavedTensor(cond, false);
  node->a_shape = BroadcastInput(a, out);
  node->b_shape = BroadcastInput(b, out);
  return out;
}

}  // namespace tessera::autograd
