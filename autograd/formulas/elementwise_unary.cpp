// Backward formulas of the unary elementwise ops, gelu (both approximations) and clamp, as
// PyTorch's derivatives.yaml: one fused kernel per gradient, or, when the gradient must record
// (create_graph), the same formula written with runtime ops (Note [Fused pointwise backward] in
// runtime/ops/elementwise_backward.cpp).

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/autograd/formulas/elementwise.h"
#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"

namespace tessera::autograd {

namespace {

const char* backward_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
      return "NegBackward0";
    case UnaryOp::kAbs:
      return "AbsBackward0";
    case UnaryOp::kExp:
      return "ExpBackward0";
    case UnaryOp::kLog:
      return "LogBackward0";
    case UnaryOp::kSqrt:
      return "SqrtBackward0";
    case UnaryOp::kRsqrt:
      return "RsqrtBackward0";
    case UnaryOp::kRelu:
      return "ReluBackward0";
    case UnaryOp::kGelu:
      return "GeluBackward0";
    case UnaryOp::kSilu:
      return "SiluBackward0";
    case UnaryOp::kTanh:
      return "TanhBackward0";
    case UnaryOp::kSigmoid:
      return "SigmoidBackward0";
    case UnaryOp::kErf:
      return "ErfBackward0";
    case UnaryOp::kErfc:
      return "ErfcBackward0";
    case UnaryOp::kLogicalNot:
      break;
  }
  TS_INTERNAL_ASSERT(false, "[", op_name(op), "] has no backward formula");
  return "";
}

// What each formula reads: PyTorch saves the result where the derivative is cheapest from it.
enum class Saves { kNothing, kInput, kOutput };

Saves saved_by(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
      return Saves::kNothing;
    case UnaryOp::kAbs:
    case UnaryOp::kLog:
    case UnaryOp::kGelu:
    case UnaryOp::kSilu:
    case UnaryOp::kErf:
    case UnaryOp::kErfc:
      return Saves::kInput;
    case UnaryOp::kExp:
    case UnaryOp::kSqrt:
    case UnaryOp::kRsqrt:
    case UnaryOp::kRelu:
    case UnaryOp::kTanh:
    case UnaryOp::kSigmoid:
      return Saves::kOutput;
    case UnaryOp::kLogicalNot:
      break;
  }
  TS_INTERNAL_ASSERT(false, "[", op_name(op), "] has no backward formula");
  return Saves::kNothing;
}

constexpr double kInvSqrt2 = 0.7071067811865476;    // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1 / sqrt(2 pi)
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluTanhCoeff = 0.044715;

// exp(-x^2 / 2) / sqrt(2 pi), the standard normal density.
Tensor normal_pdf(const Tensor& x) { return mul(exp(mul(x * x, -0.5)), kInvSqrt2Pi); }

// Phi(x) = erfc(-x / sqrt 2) / 2, the standard normal CDF (erfc keeps the negative tail exact).
Tensor normal_cdf(const Tensor& x) { return mul(erfc(mul(x, -kInvSqrt2)), 0.5); }

// d/dx gelu(x).
Tensor gelu_derivative(const Tensor& x, bool tanh_approx) {
  if (!tanh_approx) return normal_cdf(x) + x * normal_pdf(x);
  // gelu(x) = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3):
  // gelu'(x) = (1 + tanh(u)) / 2 + x/2 (1 - tanh(u)^2) u'(x).
  const Tensor x2 = x * x;
  const Tensor t = tanh(mul(x + mul(x2 * x, kGeluTanhCoeff), kSqrt2OverPi));
  const Tensor du = mul(mul(x2, 3 * kGeluTanhCoeff) + 1.0, kSqrt2OverPi);
  return mul(t + 1.0, 0.5) + mul(x, 0.5) * (1.0 - t * t) * du;
}

// grad * d/dx op(x), from what saved_by(op) says the node saved.
Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& saved) {
  switch (op) {
    case UnaryOp::kNeg:
      return neg(grad);
    case UnaryOp::kAbs: {
      // sgn(x): 0 at 0, as PyTorch.
      const Tensor sgn = (saved > 0).to(saved.dtype()) - (saved < 0).to(saved.dtype());
      return grad * sgn;
    }
    case UnaryOp::kExp:
      return grad * saved;
    case UnaryOp::kLog:
      return grad / saved;
    case UnaryOp::kSqrt:
      return grad / mul(saved, 2);
    case UnaryOp::kRsqrt:
      return mul(grad * pow(saved, 3), -0.5);
    case UnaryOp::kRelu:
      return where(saved > 0, grad, zero_of(grad));
    case UnaryOp::kGelu:
      return grad * gelu_derivative(saved, /*tanh_approx=*/false);
    case UnaryOp::kSilu: {
      const Tensor s = sigmoid(saved);
      return grad * (s * (saved * (1.0 - s) + 1.0));
    }
    case UnaryOp::kTanh:
      return grad * (1.0 - saved * saved);
    case UnaryOp::kSigmoid:
      return grad * (saved * (1.0 - saved));
    case UnaryOp::kErf:
      return grad * mul(exp(neg(saved * saved)), kTwoOverSqrtPi);
    case UnaryOp::kErfc:
      return grad * mul(exp(neg(saved * saved)), -kTwoOverSqrtPi);
    case UnaryOp::kLogicalNot:
      break;
  }
  TS_INTERNAL_ASSERT(false, "[", op_name(op), "] has no backward formula");
  return Tensor();
}

// The fused kernel of op's gradient (neg's, -grad, is one pass already).
PointwiseGradOp fused_op(UnaryOp op) {
  switch (op) {
    case UnaryOp::kAbs:
      return PointwiseGradOp::kAbsBackward;
    case UnaryOp::kExp:
      return PointwiseGradOp::kExpBackward;
    case UnaryOp::kLog:
      return PointwiseGradOp::kLogBackward;
    case UnaryOp::kSqrt:
      return PointwiseGradOp::kSqrtBackward;
    case UnaryOp::kRsqrt:
      return PointwiseGradOp::kRsqrtBackward;
    case UnaryOp::kRelu:
      return PointwiseGradOp::kReluBackward;
    case UnaryOp::kGelu:
      return PointwiseGradOp::kGeluBackward;
    case UnaryOp::kSilu:
      return PointwiseGradOp::kSiluBackward;
    case UnaryOp::kTanh:
      return PointwiseGradOp::kTanhBackward;
    case UnaryOp::kSigmoid:
      return PointwiseGradOp::kSigmoidBackward;
    case UnaryOp::kErf:
      return PointwiseGradOp::kErfBackward;
    case UnaryOp::kErfc:
      return PointwiseGradOp::kErfcBackward;
    case UnaryOp::kNeg:
    case UnaryOp::kLogicalNot:
      break;
  }
  TS_INTERNAL_ASSERT(false, "[", op_name(op), "] has no fused backward kernel");
  return PointwiseGradOp::kExpBackward;
}

class UnaryBackward final : public FormulaNode {
 public:
  explicit UnaryBackward(UnaryOp op) : FormulaNode(backward_name(op)), op_(op) {}
  SavedTensor saved;  // input or output, per saved_by(op_)
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor()};
    const Tensor x = saved.unpack(*this);
    if (op_ != UnaryOp::kNeg && fused_applies(grad, x)) {
      return {pointwise_backward_reusing_grad(fused_op(op_), std::move(grads[0]), x)};
    }
    return {unary_backward(op_, grad, x)};
  }
  void release_variables() override { saved.release(); }

 private:
  UnaryOp op_;
};

// gelu(a, approximate) (unary_op's kGelu, the exact one, is a UnaryBackward).
class GeluBackward final : public FormulaNode {
 public:
  explicit GeluBackward(bool tanh_approx) : FormulaNode("GeluBackward0"), tanh_(tanh_approx) {}
  SavedTensor self;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor()};
    const Tensor x = self.unpack(*this);
    if (fused_applies(grad, x)) {
      return {pointwise_backward_reusing_grad(
          tanh_ ? PointwiseGradOp::kGeluTanhBackward : PointwiseGradOp::kGeluBackward,
          std::move(grads[0]), x)};
    }
    return {grad * gelu_derivative(x, tanh_)};
  }
  void release_variables() override { self.release(); }

 private:
  bool tanh_;
};

// clamp_backward: the gradient passes where min <= x <= max (NaN inputs get none).
class ClampBackward final : public FormulaNode {
 public:
  ClampBackward(std::optional<Scalar> min, std::optional<Scalar> max)
      : FormulaNode("ClampBackward1"), min_(min), max_(max) {}
  SavedTensor self;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& grad = grads[0];
    if (!grad.defined()) return {Tensor()};
    const Tensor x = self.unpack(*this);
    if (fused_applies(grad, x)) {
      constexpr double kInf = std::numeric_limits<double>::infinity();
      return {pointwise_backward_reusing_grad(PointwiseGradOp::kClampBackward, std::move(grads[0]),
                                              x, {}, min_ ? min_->to_double() : -kInf,
                                              max_ ? max_->to_double() : kInf)};
    }
    Tensor pass;
    if (min_ && max_) {
      pass = logical_and(x >= *min_, x <= *max_);
    } else if (min_) {
      pass = x >= *min_;
    } else {
      pass = x <= *max_;
    }
    return {where(pass, grad, zero_of(grad))};
  }
  void release_variables() override { self.release(); }

 private:
  std::optional<Scalar> min_;
  std::optional<Scalar> max_;
};

}  // namespace

Tensor unary_with_grad(UnaryOp op, const Tensor& a) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = unary_op(op, a);
  }
  auto node = std::make_shared<UnaryBackward>(op);
  record(node, {a}, {&out});
  switch (saved_by(op)) {
    case Saves::kNothing:
      break;
    case Saves::kInput:
      node->saved = SavedTensor(a, false);
      break;
    case Saves::kOutput:
      node->saved = SavedTensor(out, true);
      break;
  }
  return out;
}

Tensor gelu_with_grad(const Tensor& a, const std::string& approximate) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = gelu(a, approximate);
  }
  auto node = std::make_shared<GeluBackward>(approximate == "tanh");
  record(node, {a}, {&out});
  node->self = SavedTensor(a, false);
  return out;
}

Tensor clamp_with_grad(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = clamp(a, min, max);
  }
  auto node = std::make_shared<ClampBackward>(min, max);
  record(node, {a}, {&out});
  node->self = SavedTensor(a, false);
  return out;
}

}  // namespace tessera::autograd
