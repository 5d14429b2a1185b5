// CUDA binary ops and where, and the family's registration. The scalar math is
// kernels/cpu/elementwise_functors.h, shared with the CPU kernels (Note [CUDA elementwise loops]).

#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/elementwise.cuh"

namespace tessera::cuda {

namespace {

// Integer division by zero: the CPU kernel raises, but a device kernel cannot raise without a
// host round trip on every division, so the CUDA kernel defines the quotient as 0 instead of the
// hardware's unspecified value (PyTorch's CUDA kernels do not check either).
struct IntDivFn {
  template <typename C>
  __device__ C operator()(C a, C b) const {
    return b == C(0) ? C(0) : cpu::BinaryFn<BinaryOp::kDiv>{}(a, b);
  }
};

// out = f(a, b) with a, b of storage type T and out of type O (T, or bool for comparisons).
template <typename T, typename O, typename F>
struct ZipFn {
  static constexpr int kVec = kVecOf<T>;
  O* out;
  const T* a;
  const T* b;

  __device__ O apply(T x, T y) const {
    if constexpr (std::is_same_v<O, T>) {
      return from_opmath<T>(F{}(to_opmath<T>(x), to_opmath<T>(y)));
    } else {
      return F{}(to_opmath<T>(x), to_opmath<T>(y));
    }
  }
  template <int V>
  __device__ void vec(int64_t i) const {
    const Vec<T, V> x = load_vec<T, V>(a + i);
    const Vec<T, V> y = load_vec<T, V>(b + i);
    Vec<O, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = apply(x.v[j], y.v[j]);
    store_vec<O, V>(out + i, r);
  }
  __device__ void at(const int64_t* off) const { out[off[0]] = apply(a[off[1]], b[off[2]]); }
};

template <BinaryOp op, typename T>
void binary_typed(const Tensor& out, const Tensor& a, const Tensor& b) {
  using C = opmath_t<T>;
  using F = cpu::BinaryFn<op>;
  using O = std::conditional_t<F::kCompare, bool, T>;
  if constexpr (!F::template supports<C>) {
    TS_CHECK_DTYPE(false, "[", op_name(op), "] has no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    using G = std::conditional_t<op == BinaryOp::kDiv && cpu::kIsInt<C>, IntDivFn, F>;
    launch_elementwise<3>(
        op_name(op), {&out, &a, &b},
        ZipFn<T, O, G>{device_ptr<O>(out), device_ptr<const T>(a), device_ptr<const T>(b)});
  }
}

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
#define TS_CASE(e, name, kind)               \
  case BinaryOp::e:                          \
    binary_typed<BinaryOp::e, T>(out, a, b); \
    break;
      TS_FOR_EACH_BINARY_OP(TS_CASE)
#undef TS_CASE
    }
  });
}

// Selection copies storage values, so one kernel per element size serves every dtype.
template <typename T>
struct WhereFn {
  static constexpr int kVec = kVecOf<T>;
  T* out;
  const bool* cond;
  const T* a;
  const T* b;

  template <int V>
  __device__ void vec(int64_t i) const {
    const Vec<bool, V> c = load_vec<bool, V>(cond + i);
    const Vec<T, V> x = load_vec<T, V>(a + i);
    const Vec<T, V> y = load_vec<T, V>(b + i);
    Vec<T, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = c.v[j] ? x.v[j] : y.v[j];
    store_vec<T, V>(out + i, r);
  }
  __device__ void at(const int64_t* off) const {
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

template <typename T>
void where_sized(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  launch_elementwise<4>("where", {&out, &cond, &a, &b},
                        WhereFn<T>{device_ptr<T>(out), device_ptr<const bool>(cond),
                                   device_ptr<const T>(a), device_ptr<const T>(b)});
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  switch (out.element_size()) {
    case 1:
      return where_sized<uint8_t>(out, cond, a, b);
    case 2:
      return where_sized<uint16_t>(out, cond, a, b);
    case 4:
      return where_sized<uint32_t>(out, cond, a, b);
    case 8:
      return where_sized<uint64_t>(out, cond, a, b);
    default:
      TS_INTERNAL_ASSERT(false, "[where] unexpected element size ", out.element_size());
  }
}

}  // namespace

void register_elementwise_kernels(KernelTable& table) {
  table.unary = unary_kernel;
  table.binary = binary_kernel;
  table.where = where_kernel;
  table.clamp = clamp_kernel;
}

}  // namespace tessera::cuda
