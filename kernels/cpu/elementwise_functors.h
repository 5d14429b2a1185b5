#pragma once
// Scalar math of the elementwise ops, written once for the CPU kernels and the CUDA kernels (which
// include this header under nvcc). Each functor computes in the op-math type of the storage type
// (float for Half and BFloat16, the type itself otherwise) and says which op-math types it
// supports; the kernels refuse the others, the entry points in runtime/ops/elementwise.cpp never
// send them.
//
// Note [Integer wrap-around]
// Signed overflow is undefined behaviour in C++ but wraps in PyTorch (two's complement), so
// integer add/sub/mul/neg/abs/pow go through the unsigned type.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tessera/runtime/half.h"
#include "tessera/runtime/host_device.h"
#include "tessera/runtime/op_table.h"

namespace tessera::cpu {

template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

template <typename C>
inline constexpr bool kIsFloat = std::is_floating_point_v<C>;
template <typename C>
inline constexpr bool kIsInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;
template <typename C>
inline constexpr bool kIsNumber = kIsFloat<C> || kIsInt<C>;

// See Note [Integer wrap-around].
template <typename C>
TS_HOST_DEVICE inline C wrap_neg(C x) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(U{0} - static_cast<U>(x));
}
template <typename C>
TS_HOST_DEVICE inline C wrap_add(C a, C b) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
}
template <typename C>
TS_HOST_DEVICE inline C wrap_sub(C a, C b) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(a) - static_cast<U>(b));
}
template <typename C>
TS_HOST_DEVICE inline C wrap_mul(C a, C b) {
  using U = std::make_unsigned_t<C>;
  // Promote through unsigned int so that uint8 products do not become signed int.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<C>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b)));
}

// Integer power as PyTorch: exact by squaring (wrapping); a negative exponent gives 0 except for
// bases 1 and -1, whose powers stay in range.
template <typename C>
TS_HOST_DEVICE inline C int_pow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  C result = 1;
  while (exp != 0) {
    if (exp & 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exp = static_cast<C>(exp >> 1);
  }
  return result;
}

// Both maximum and minimum propagate NaN, as torch.maximum / torch.minimum.
template <typename C>
TS_HOST_DEVICE inline C nan_max(C a, C b) {
  if constexpr (kIsFloat<C>) {
    return (a > b || a != a) ? a : b;
  } else {
    return a > b ? a : b;
  }
}
template <typename C>
TS_HOST_DEVICE inline C nan_min(C a, C b) {
  if constexpr (kIsFloat<C>) {
    return (a < b || a != a) ? a : b;
  } else {
    return a < b ? a : b;
  }
}

// ---- unary: UnaryFn<op>{}(x) in op-math type C; supports<C> says which C are valid ----

template <UnaryOp op>
struct UnaryFn;

template <>
struct UnaryFn<UnaryOp::kNeg> {
  template <typename C>
  static constexpr bool supports = kIsNumber<C>;
  template <typename C>
  TS_HOST_DEVICE C operator()(C x) const {
    if constexpr (kIsInt<C>) {
      return wrap_neg(x);
    } else {
      return -x;
    }
  }
};

template <>
struct UnaryFn<UnaryOp::kAbs> {
  template <typename C>
  static constexpr bool supports = kIsNumber<C>;
  template <typename C>
  TS_HOST_DEVICE C operator()(C x) const {
    if constexpr (kIsFloat<C>) {
      return std::fabs(x);
    } else if constexpr (std::is_signed_v<C>) {
      return x < 0 ? wrap_neg(x) : x;
    } else {
      return x;
    }
  }
};

template <>
struct UnaryFn<UnaryOp::kRelu> {
  template <typename C>
  static constexpr bool supports = kIsNumber<C>;
  // NaN fails the comparison and passes through, as torch.relu.
  template <typename C>
  TS_HOST_DEVICE C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;  // nothing is below zero (and nvcc warns on the comparison)
    } else {
      return x < C(0) ? C(0) : x;
    }
  }
};

template <>
struct UnaryFn<UnaryOp::kLogicalNot> {
  template <typename C>
  static constexpr bool supports = std::is_same_v<C, bool>;
  TS_HOST_DEVICE bool operator()(bool x) const { return !x; }
};

// The transcendental ops accept floating op-math types only.
#define TS_FLOAT_UNARY_FN(op, expr)               \
  template <>                                     \
  struct UnaryFn<UnaryOp::op> {                   \
    template <typename C>                         \
    static constexpr bool supports = kIsFloat<C>; \
    template <typename C>                         \
    TS_HOST_DEVICE C operator()(C x) const {      \
      return expr;                                \
    }                                             \
  };

TS_FLOAT_UNARY_FN(kExp, std::exp(x))
TS_FLOAT_UNARY_FN(kLog, std::log(x))
TS_FLOAT_UNARY_FN(kSqrt, std::sqrt(x))
TS_FLOAT_UNARY_FN(kRsqrt, C(1) / std::sqrt(x))
TS_FLOAT_UNARY_FN(kTanh, std::tanh(x))
TS_FLOAT_UNARY_FN(kSigmoid, C(1) / (C(1) + std::exp(-x)))
TS_FLOAT_UNARY_FN(kSilu, x / (C(1) + std::exp(-x)))
// Exact (erf) GELU; the tanh approximation is composed by the entry point.
TS_FLOAT_UNARY_FN(kGelu, C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440))))
TS_FLOAT_UNARY_FN(kErf, std::erf(x))
TS_FLOAT_UNARY_FN(kErfc, std::erfc(x))
#undef TS_FLOAT_UNARY_FN

// ---- binary: BinaryFn<op>{}(a, b) in op-math type C; kCompare ops return bool ----

template <BinaryOp op>
struct BinaryFn;

template <>
struct BinaryFn<BinaryOp::kAdd> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) {
      return a || b;
    } else if constexpr (kIsInt<C>) {
      return wrap_add(a, b);
    } else {
      return a + b;
    }
  }
};

template <>
struct BinaryFn<BinaryOp::kSub> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = kIsNumber<C>;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      return wrap_sub(a, b);
    } else {
      return a - b;
    }
  }
};

template <>
struct BinaryFn<BinaryOp::kMul> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) {
      return a && b;
    } else if constexpr (kIsInt<C>) {
      return wrap_mul(a, b);
    } else {
      return a * b;
    }
  }
};

// True division in floating types. Integer division truncates; the caller must rule out a zero
// divisor (the CPU kernel raises), and INT_MIN / -1 wraps instead of trapping.
template <>
struct BinaryFn<BinaryOp::kDiv> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = kIsNumber<C>;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (kIsInt<C> && std::is_signed_v<C>) {
      return b == C(-1) ? wrap_neg(a) : C(a / b);
    } else {
      return a / b;
    }
  }
};

template <>
struct BinaryFn<BinaryOp::kPow> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = kIsNumber<C>;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      return int_pow(a, b);
    } else {
      return std::pow(a, b);
    }
  }
};

template <>
struct BinaryFn<BinaryOp::kMaximum> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    return nan_max(a, b);
  }
};

template <>
struct BinaryFn<BinaryOp::kMinimum> {
  static constexpr bool kCompare = false;
  template <typename C>
  static constexpr bool supports = true;
  template <typename C>
  TS_HOST_DEVICE C operator()(C a, C b) const {
    return nan_min(a, b);
  }
};

#define TS_COMPARE_FN(op, expr)                      \
  template <>                                        \
  struct BinaryFn<BinaryOp::op> {                    \
    static constexpr bool kCompare = true;           \
    template <typename C>                            \
    static constexpr bool supports = true;           \
    template <typename C>                            \
    TS_HOST_DEVICE bool operator()(C a, C b) const { \
      return expr;                                   \
    }                                                \
  };

TS_COMPARE_FN(kEq, a == b)
TS_COMPARE_FN(kNe, a != b)
TS_COMPARE_FN(kLt, a < b)
TS_COMPARE_FN(kLe, a <= b)
TS_COMPARE_FN(kGt, a > b)
TS_COMPARE_FN(kGe, a >= b)
TS_COMPARE_FN(kLogicalAnd, a != C(0) && b != C(0))
TS_COMPARE_FN(kLogicalOr, a != C(0) || b != C(0))
#undef TS_COMPARE_FN

// out = min(max(x, lo), hi) with either bound optional; NaN in x or in a bound propagates, as
// torch.clamp.
template <typename C>
struct ClampFn {
  C lo;
  C hi;
  bool has_lo;
  bool has_hi;
  TS_HOST_DEVICE C operator()(C x) const {
    if (has_lo) x = nan_max(x, lo);
    if (has_hi) x = nan_min(x, hi);
    return x;
  }
};

// ---- fused backward: GradFn<op, C>{p0, p1}(g, x, y), floating C only ----
// The gradient of one input of a pointwise op from the incoming gradient g and the saved operands
// (PointwiseGradOp in runtime/op_table.h says what x, y, p0 and p1 are; y is 0 for one-operand
// ops). Written to follow the composite formulas of autograd/formulas/elementwise_*.cpp term for
// term, which create_graph still uses.

inline constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1 / sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)
inline constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;
inline constexpr double kGeluTanhCoeff = 0.044715;

template <PointwiseGradOp op, typename C>
struct GradFn;

#define TS_GRAD_FN(op, expr)                                                             \
  template <typename C>                                                                  \
  struct GradFn<PointwiseGradOp::op, C> {                                                \
    C p0;                                                                                \
    C p1;                                                                                \
    TS_HOST_DEVICE C operator()(C g, [[maybe_unused]] C x, [[maybe_unused]] C y) const { \
      return expr;                                                                       \
    }                                                                                    \
  };

// Formatting off: clang-format takes `g * x` in a macro argument for a declaration.
// clang-format off
TS_GRAD_FN(kAbsBackward, g * C((x > C(0)) - (x < C(0))))
TS_GRAD_FN(kExpBackward, g * x)
TS_GRAD_FN(kLogBackward, g / x)
TS_GRAD_FN(kSqrtBackward, g / (C(2) * x))
TS_GRAD_FN(kRsqrtBackward, g * x * x * x * C(-0.5))
TS_GRAD_FN(kReluBackward, x > C(0) ? g : C(0))
// Phi(x) through erfc, which keeps its relative accuracy far into the negative tail.
TS_GRAD_FN(kGeluBackward, g * (C(0.5) * std::erfc(-x * C(kInvSqrt2)) +
                               x * C(kInvSqrt2Pi) * std::exp(C(-0.5) * x * x)))
TS_GRAD_FN(kTanhBackward, g * (C(1) - x * x))
TS_GRAD_FN(kSigmoidBackward, g * (x * (C(1) - x)))
TS_GRAD_FN(kErfBackward, g * C(kTwoOverSqrtPi) * std::exp(-x * x))
TS_GRAD_FN(kErfcBackward, g * C(-kTwoOverSqrtPi) * std::exp(-x * x))
// NaN fails both comparisons: no gradient, as clamp_backward.
TS_GRAD_FN(kClampBackward, x >= p0 && x <= p1 ? g : C(0))
TS_GRAD_FN(kPowScalarBackward, p0 == C(0) ? C(0) : g * (std::pow(x, p0 - C(1)) * p0))
TS_GRAD_FN(kRdivBackward, g / (x * x) * -p0)
TS_GRAD_FN(kRpowBackward, g * (x * p0))
TS_GRAD_FN(kDivOtherBackward, -g * x / (y * y))
TS_GRAD_FN(kPowSelfBackward, y == C(0) ? C(0) : g * (y * std::pow(x, y - C(1))))
TS_GRAD_FN(kPowExponentBackward,
           x == C(0) && y >= C(0) ? C(0) : g * (std::pow(x, y) * std::log(x)))
// clang-format on
#undef TS_GRAD_FN

// gelu(x) = x/2 (1 + tanh(u)) = x s, s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), so
// gelu'(x) = s (1 + 2 x (1 - s) u'(x)). Not from tanh(u): 1 + tanh(u) cancels for negative x and
// float32 would lose about 1e-6 of a derivative of that size.
template <typename C>
struct GradFn<PointwiseGradOp::kGeluTanhBackward, C> {
  C p0;
  C p1;
  TS_HOST_DEVICE C operator()(C g, C x, C /*y*/) const {
    const C x2 = x * x;
    const C u = C(kSqrt2OverPi) * (x + C(kGeluTanhCoeff) * x2 * x);
    const C s = C(1) / (C(1) + std::exp(C(-2) * u));
    const C du = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluTanhCoeff) * x2);
    return g * (s * (C(1) + C(2) * x * (C(1) - s) * du));
  }
};

// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
template <typename C>
struct GradFn<PointwiseGradOp::kSiluBackward, C> {
  C p0;
  C p1;
  TS_HOST_DEVICE C operator()(C g, C x, C /*y*/) const {
    const C s = C(1) / (C(1) + std::exp(-x));
    return g * (s * (C(1) + x * (C(1) - s)));
  }
};

}  // namespace tessera::cpu
