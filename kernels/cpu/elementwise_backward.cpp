// CPU kernel of the fused pointwise backward ops (KernelTable::pointwise_grad): one pass over the
// incoming gradient and the saved operands per input gradient. The scalar math is GradFn in
// kernels/cpu/elementwise_functors.h; the ops whose derivative needs exp, erf or tanh take
// Eigen's packet math instead for float and double, as the forward unary kernels do.

#include <Eigen/Core>
#include <algorithm>
#include <unsupported/Eigen/SpecialFunctions>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/elementwise_functors.h"
#include "tessera/kernels/cpu/elementwise_loops.h"
#include "tessera/kernels/cpu/gelu_avx512.h"
#include "tessera/runtime/pointwise_grad_operands.h"

namespace tessera::cpu {

namespace {

template <typename C>
using ArrayMap = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
template <typename C>
using ConstArrayMap = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;

// o[0, n) = fn(g, x, y) on contiguous op-math data (y unread for one-operand ops); o may alias g.
template <PointwiseGradOp op, typename C>
void grad_run(C* o, const C* g, const C* x, [[maybe_unused]] const C* y, int64_t n,
              [[maybe_unused]] const GradFn<op, C>& fn) {
  constexpr bool kTwoStep =
      op == PointwiseGradOp::kGeluTanhBackward || op == PointwiseGradOp::kSiluBackward;
  if constexpr (op == PointwiseGradOp::kGeluBackward) {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<C, float>) {  // Note [GELU from tables]
      gelu_backward_avx512(o, g, x, n);
      return;
    }
#endif
    // Eigen's erf is vectorized, its erfc is not: Phi from erf here, as in the forward kernel.
    ConstArrayMap<C> xv(x, n);
    ArrayMap<C>(o, n) =
        ConstArrayMap<C>(g, n) * (C(0.5) * (C(1) + (xv * C(kInvSqrt2)).erf()) +
                                  xv * C(kInvSqrt2Pi) * (C(-0.5) * xv.square()).exp());
  } else if constexpr (op == PointwiseGradOp::kErfBackward ||
                       op == PointwiseGradOp::kErfcBackward) {
    constexpr C kScale = C(op == PointwiseGradOp::kErfBackward ? kTwoOverSqrtPi : -kTwoOverSqrtPi);
    ArrayMap<C>(o, n) = ConstArrayMap<C>(g, n) * kScale * (-ConstArrayMap<C>(x, n).square()).exp();
  } else if constexpr (kTwoStep) {
    // The transcendental term (a sigmoid) is used twice: computed once into an L1
    // buffer per block rather than twice by one Eigen expression.
    C t[kOpMathBlock];
    for (int64_t i = 0; i < n; i += kOpMathBlock) {
      const int64_t m = std::min(kOpMathBlock, n - i);
      ConstArrayMap<C> xv(x + i, m);
      ConstArrayMap<C> gv(g + i, m);
      ArrayMap<C> tv(t, m);
      ArrayMap<C> out(o + i, m);
      if constexpr (op == PointwiseGradOp::kGeluTanhBackward) {
        // s = sigmoid(2u), as GradFn.
        tv = (C(1) + (C(-2 * kSqrt2OverPi) * (xv + C(kGeluTanhCoeff) * xv.square() * xv)).exp())
                 .inverse();
        out = gv *
              (tv * (C(1) + C(2) * xv * (C(1) - tv) *
                                (C(kSqrt2OverPi) * (C(1) + C(3 * kGeluTanhCoeff) * xv.square()))));
      } else {
        tv = (C(1) + (-xv).exp()).inverse();
        out = gv * (tv * (C(1) + xv * (C(1) - tv)));
      }
    }
  } else if constexpr (pointwise_grad_operand_count(op) == 2) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(g[i], x[i], y[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(g[i], x[i], C(0));
  }
}

// out = fn(grad, x[, y]), all of storage type T.
template <PointwiseGradOp op, typename T>
void grad_apply(const Tensor& out, const Tensor& grad, const Tensor& x, const Tensor& y,
                const GradFn<op, opmath_t<T>>& fn) {
  using C = opmath_t<T>;
  constexpr size_t kN = 2 + pointwise_grad_operand_count(op);
  std::array<const Tensor*, kN> ts;
  ts[0] = &out;
  ts[1] = &grad;
  ts[2] = &x;
  if constexpr (kN == 4) ts[3] = &y;
  for_each_element<kN>(ts, [&](std::array<char*, kN> p, std::array<int64_t, kN> s, int64_t n) {
    constexpr auto kSize = static_cast<int64_t>(sizeof(T));
    if constexpr (std::is_same_v<T, C>) {
      if (std::all_of(s.begin(), s.end(), [](int64_t b) { return b == kSize; })) {
        grad_run<op>(reinterpret_cast<C*>(p[0]), reinterpret_cast<const C*>(p[1]),
                     reinterpret_cast<const C*>(p[2]),
                     kN == 4 ? reinterpret_cast<const C*>(p[kN - 1]) : nullptr, n, fn);
        return;
      }
    }
    // Other dtypes and strides (broadcast operands included) through op-math buffers.
    C gbuf[kOpMathBlock], xbuf[kOpMathBlock], ybuf[kOpMathBlock];
    for (int64_t i = 0; i < n; i += kOpMathBlock) {
      const int64_t m = std::min(kOpMathBlock, n - i);
      gather<T>(gbuf, p[1] + i * s[1], s[1], m);
      gather<T>(xbuf, p[2] + i * s[2], s[2], m);
      if constexpr (kN == 4) gather<T>(ybuf, p[3] + i * s[3], s[3], m);
      grad_run<op>(gbuf, gbuf, xbuf, ybuf, m, fn);
      scatter<T>(p[0] + i * s[0], s[0], gbuf, m);
    }
  });
}

template <PointwiseGradOp op, typename T>
void grad_typed(const Tensor& out, const Tensor& grad, const Tensor& x, const Tensor& y, double p0,
                double p1) {
  using C = opmath_t<T>;
  if constexpr (kIsFloat<C>) {
    GradFn<op, C> fn{static_cast<C>(p0), static_cast<C>(p1)};
    if constexpr (op == PointwiseGradOp::kClampBackward) {
      // The forward rounds its bounds to the storage type; compare against the same values.
      fn = {static_cast<C>(static_cast<T>(p0)), static_cast<C>(static_cast<T>(p1))};
    }
    grad_apply<op, T>(out, grad, x, y, fn);
  } else {
    TS_CHECK_DTYPE(false, "[", op_name(op), "] has no CPU kernel for dtype ", dtype_of<T>);
  }
}

void pointwise_grad_kernel(PointwiseGradOp op, const Tensor& out, const Tensor& grad_,
                           const Tensor& x_, const Tensor& y_, double p0, double p1) {
  // Transposed operands copied first (Note [Inputs read across the grain] in elementwise.cpp).
  Tensor grad_copy, x_copy, y_copy;
  const Tensor& grad = staged_input(out, grad_, grad_copy);
  const Tensor& x = staged_input(out, x_, x_copy);
  const Tensor& y = staged_input(out, y_, y_copy);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
#define TS_CASE(e, name, operands)                              \
  case PointwiseGradOp::e:                                      \
    grad_typed<PointwiseGradOp::e, T>(out, grad, x, y, p0, p1); \
    break;
      TS_FOR_EACH_POINTWISE_GRAD_OP(TS_CASE)
#undef TS_CASE
    }
  });
}

}  // namespace

template <>
void register_elementwise_backward_kernels<kThisCpuIsa>(KernelTable& table) {
  table.pointwise_grad = pointwise_grad_kernel;
}

}  // namespace tessera::cpu
