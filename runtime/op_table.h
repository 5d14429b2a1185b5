#pragma once
// The one table of elementwise ops (see CONVENTIONS.md: op lists rot first). Every aspect of an
// elementwise op — its enumerator, its name in errors, its kernel functor, its test entry — is
// looked up from these X-macros.

namespace tessera {

// X(enumerator, name, result_is_floating): unary ops on one tensor.
#define TS_FOR_EACH_UNARY_OP(X) \
  X(kNeg, "neg", false)         \
  X(kAbs, "abs", false)         \
  X(kExp, "exp", true)          \
  X(kLog, "log", true)          \
  X(kSqrt, "sqrt", true)        \
  X(kRsqrt, "rsqrt", true)      \
  X(kRelu, "relu", false)       \
  X(kGelu, "gelu", true)        \
  X(kSilu, "silu", true)        \
  X(kTanh, "tanh", true)        \
  X(kSigmoid, "sigmoid", true)  \
  X(kErf, "erf", true)          \
  X(kErfc, "erfc", true)        \
  X(kLogicalNot, "logical_not", false)

// X(enumerator, name, kind): binary ops with broadcasting. kind: arith (result in the promoted
// type), true_div (promoted to floating), compare (result kBool).
#define TS_FOR_EACH_BINARY_OP(X)         \
  X(kAdd, "add", arith)                  \
  X(kSub, "sub", arith)                  \
  X(kMul, "mul", arith)                  \
  X(kDiv, "div", true_div)               \
  X(kPow, "pow", arith)                  \
  X(kMaximum, "maximum", arith)          \
  X(kMinimum, "minimum", arith)          \
  X(kEq, "eq", compare)                  \
  X(kNe, "ne", compare)                  \
  X(kLt, "lt", compare)                  \
  X(kLe, "le", compare)                  \
  X(kGt, "gt", compare)                  \
  X(kGe, "ge", compare)                  \
  X(kLogicalAnd, "logical_and", compare) \
  X(kLogicalOr, "logical_or", compare)

// X(enumerator, name): reductions over a set of dims.
#define TS_FOR_EACH_REDUCE_OP(X) \
  X(kSum, "sum")                 \
  X(kProd, "prod")               \
  X(kMean, "mean")               \
  X(kAmax, "amax")               \
  X(kAmin, "amin")               \
  X(kArgmax, "argmax")           \
  X(kArgmin, "argmin")           \
  X(kVar, "var")                 \
  X(kNorm, "norm")

// X(enumerator, name, operands): the fused backward kernels of pointwise ops (Note [Fused
// pointwise backward] in runtime/ops/elementwise_backward.cpp). Each computes one input's gradient
// in one pass over grad and `operands` saved tensors x (and y), with scalar parameters p0, p1:
//   abs       x = input            grad sgn(x)
//   exp       x = result           grad x
//   log       x = input            grad / x
//   sqrt      x = result           grad / (2 x)
//   rsqrt     x = result           -grad x^3 / 2
//   relu      x = result           x > 0 ? grad : 0
//   gelu      x = input            grad gelu'(x), exact (erf) form
//   gelu_tanh x = input            grad gelu'(x), tanh approximation
//   silu      x = input            grad silu'(x)
//   tanh      x = result           grad (1 - x^2)
//   sigmoid   x = result           grad x (1 - x)
//   erf       x = input            grad 2/sqrt(pi) exp(-x^2); erfc: its negation
//   clamp     x = input            p0 <= x <= p1 ? grad : 0 (absent bounds are -inf / inf)
//   pow_scalar  x^p0, x = input    p0 == 0 ? 0 : grad p0 x^(p0 - 1)
//   rdiv      p0 / x, x = input    -grad p0 / x^2
//   rpow      e^(p0 x), x = result grad x p0 (p0 = log of the base, nonzero base)
//   div_other x / y                -grad x / y^2
//   pow_self  x^y                  y == 0 ? 0 : grad y x^(y - 1)
//   pow_exponent x^y               x == 0 && y >= 0 ? 0 : grad x^y log(x)
#define TS_FOR_EACH_POINTWISE_GRAD_OP(X)          \
  X(kAbsBackward, "abs_backward", 1)              \
  X(kExpBackward, "exp_backward", 1)              \
  X(kLogBackward, "log_backward", 1)              \
  X(kSqrtBackward, "sqrt_backward", 1)            \
  X(kRsqrtBackward, "rsqrt_backward", 1)          \
  X(kReluBackward, "relu_backward", 1)            \
  X(kGeluBackward, "gelu_backward", 1)            \
  X(kGeluTanhBackward, "gelu_tanh_backward", 1)   \
  X(kSiluBackward, "silu_backward", 1)            \
  X(kTanhBackward, "tanh_backward", 1)            \
  X(kSigmoidBackward, "sigmoid_backward", 1)      \
  X(kErfBackward, "erf_backward", 1)              \
  X(kErfcBackward, "erfc_backward", 1)            \
  X(kClampBackward, "clamp_backward", 1)          \
  X(kPowScalarBackward, "pow_scalar_backward", 1) \
  X(kRdivBackward, "rdiv_backward", 1)            \
  X(kRpowBackward, "rpow_backward", 1)            \
  X(kDivOtherBackward, "div_other_backward", 2)   \
  X(kPowSelfBackward, "pow_self_backward", 2)     \
  X(kPowExponentBackward, "pow_exponent_backward", 2)

enum class UnaryOp : unsigned char {
#define TS_ENUM(e, name, f) e,
  TS_FOR_EACH_UNARY_OP(TS_ENUM)
#undef TS_ENUM
};
enum class BinaryOp : unsigned char {
#define TS_ENUM(e, name, kind) e,
  TS_FOR_EACH_BINARY_OP(TS_ENUM)
#undef TS_ENUM
};
enum class PointwiseGradOp : unsigned char {
#define TS_ENUM(e, name, operands) e,
  TS_FOR_EACH_POINTWISE_GRAD_OP(TS_ENUM)
#undef TS_ENUM
};
enum class ReductionOp : unsigned char {
#define TS_ENUM(e, name) e,
  TS_FOR_EACH_REDUCE_OP(TS_ENUM)
#undef TS_ENUM
};

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(ReductionOp op);
const char* op_name(PointwiseGradOp op);

}  // namespace tessera
