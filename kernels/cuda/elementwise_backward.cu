// CUDA twin of kernels/cpu/elementwise_backward.cpp (KernelTable::pointwise_grad): the gradient of
// one input of a pointwise op in one pass. The scalar math is GradFn of
// kernels/cpu/elementwise_functors.h, shared with the CPU kernel (Note [CUDA elementwise loops]).

#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/elementwise.cuh"
#include "tessera/runtime/pointwise_grad_operands.h"

namespace tessera::cuda {

namespace {

// out = f(grad, x[, y]) with every operand of storage type T; Y says whether y is read.
template <typename T, typename F, bool Y>
struct GradMapFn {
  static constexpr int kVec = kVecOf<T>;
  T* out;
  const T* grad;
  const T* x;
  const T* y;
  F f;

  __device__ T apply(T g, T a, T b) const {
    return from_opmath<T>(f(to_opmath<T>(g), to_opmath<T>(a), to_opmath<T>(b)));
  }
  template <int V>
  __device__ void vec(int64_t i) const {
    const Vec<T, V> g = load_vec<T, V>(grad + i);
    const Vec<T, V> a = load_vec<T, V>(x + i);
    Vec<T, V> b{};
    if constexpr (Y) b = load_vec<T, V>(y + i);
    Vec<T, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = apply(g.v[j], a.v[j], b.v[j]);
    store_vec<T, V>(out + i, r);
  }
  __device__ void at(const int64_t* off) const {
    if constexpr (Y) {
      out[off[0]] = apply(grad[off[1]], x[off[2]], y[off[3]]);
    } else {
      out[off[0]] = apply(grad[off[1]], x[off[2]], T{});
    }
  }
};

template <PointwiseGradOp op, typename T>
void grad_typed(const Tensor& out, const Tensor& grad, const Tensor& x, const Tensor& y, double p0,
                double p1) {
  using C = opmath_t<T>;
  using F = cpu::GradFn<op, C>;
  if constexpr (cpu::kIsFloat<C>) {
    F f{static_cast<C>(p0), static_cast<C>(p1)};
    if constexpr (op == PointwiseGradOp::kClampBackward) {
      // The forward rounds its bounds to the storage type; compare against the same values.
      f = F{static_cast<C>(static_cast<T>(p0)), static_cast<C>(static_cast<T>(p1))};
    }
    if constexpr (pointwise_grad_operand_count(op) == 2) {
      launch_elementwise<4>(
          op_name(op), {&out, &grad, &x, &y},
          GradMapFn<T, F, true>{device_ptr<T>(out), device_ptr<const T>(grad),
                                device_ptr<const T>(x), device_ptr<const T>(y), f});
    } else {
      launch_elementwise<3>(op_name(op), {&out, &grad, &x},
                            GradMapFn<T, F, false>{device_ptr<T>(out), device_ptr<const T>(grad),
                                                   device_ptr<const T>(x), nullptr, f});
    }
  } else {
    TS_CHECK_DTYPE(false, "[", op_name(op), "] has no CUDA kernel for dtype ", dtype_of<T>);
  }
}

void pointwise_grad_kernel(PointwiseGradOp op, const Tensor& out, const Tensor& grad,
                           const Tensor& x, const Tensor& y, double p0, double p1) {
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

void register_elementwise_backward_kernels(KernelTable& table) {
  table.pointwise_grad = pointwise_grad_kernel;
}

}  // namespace tessera::cuda
