// CUDA unary ops and clamp. The scalar math is kernels/cpu/elementwise_functors.h, shared with the
// CPU kernels; this file only maps it over memory (Note [CUDA elementwise loops]).

#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/elementwise.cuh"

namespace tessera::cuda {

namespace {

// out = f(in) elementwise, f taking and returning op-math values of storage type T.
template <typename T, typename F>
struct MapFn {
  static constexpr int kVec = kVecOf<T>;
  T* out;
  const T* in;
  F f;

  __device__ T apply(T x) const { return from_opmath<T>(f(to_opmath<T>(x))); }
  template <int V>
  __device__ void vec(int64_t i) const {
    const Vec<T, V> x = load_vec<T, V>(in + i);
    Vec<T, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = apply(x.v[j]);
    store_vec<T, V>(out + i, r);
  }
  __device__ void at(const int64_t* off) const { out[off[0]] = apply(in[off[1]]); }
};

template <UnaryOp op, typename T>
void unary_typed(const Tensor& out, const Tensor& in) {
  using C = opmath_t<T>;
  using F = cpu::UnaryFn<op>;
  if constexpr (F::template supports<C>) {
    launch_elementwise<2>(op_name(op), {&out, &in},
                          MapFn<T, F>{device_ptr<T>(out), device_ptr<const T>(in), F{}});
  } else {
    TS_CHECK_DTYPE(false, "[", op_name(op), "] has no CUDA kernel for dtype ", dtype_of<T>);
  }
}

}  // namespace

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
#define TS_CASE(e, name, f)              \
  case UnaryOp::e:                       \
    unary_typed<UnaryOp::e, T>(out, in); \
    break;
      TS_FOR_EACH_UNARY_OP(TS_CASE)
#undef TS_CASE
    }
  });
}

void clamp_kernel(const Tensor& out, const Tensor& in, const Scalar& lo, bool has_lo,
                  const Scalar& hi, bool has_hi) {
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = opmath_t<T>;
    if constexpr (cpu::kIsNumber<C>) {
      // Bounds are rounded to the storage type first, as the result is (and as the CPU kernel).
      const cpu::ClampFn<C> fn{static_cast<C>(lo.to<T>()), static_cast<C>(hi.to<T>()), has_lo,
                               has_hi};
      launch_elementwise<2>(
          "clamp", {&out, &in},
          MapFn<T, cpu::ClampFn<C>>{device_ptr<T>(out), device_ptr<const T>(in), fn});
    } else {
      TS_CHECK_DTYPE(false, "[clamp] has no CUDA kernel for dtype ", dtype_of<T>);
    }
  });
}

}  // namespace tessera::cuda
