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
  X(kLogicalNot, "logical_not", false)

// X(enumerator, name, kind): binary ops with broadcasting. kind: arith (result in the promoted
// type), true_div (promoted to floating), compare (result kBool).
#define TS_FOR_EACH_BINARY_OP(X)  \
  X(kAdd, "add", arith)           \
  X(kSub, "sub", arith)           \
  X(kMul, "mul", arith)           \
  X(kDiv, "div", true_div)        \
  X(kPow, "pow", arith)           \
  X(kMaximum, "maximum", arith)   \
  X(kMinimum, "minimum", arith)   \
  X(kEq, "eq", compare)           \
  X(kNe, "ne", compare)           \
  X(kLt, "lt", compare)           \
  X(kLe, "le", compare)           \
  X(kGt, "gt", compare)           \
  X(kGe, "ge", compare)           \
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
enum class ReductionOp : unsigned char {
#define TS_ENUM(e, name) e,
  TS_FOR_EACH_REDUCE_OP(TS_ENUM)
#undef TS_ENUM
};

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(ReductionOp op);

}  // namespace tessera
