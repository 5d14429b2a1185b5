#pragma once
// The loop of the CUDA elementwise kernels (unary, binary, where, clamp).
//
// Note [CUDA elementwise loops]
// An op is a functor Fn holding its typed operand pointers, with
//   Fn::kVec                      elements per 16-byte load of its widest operand type,
//   fn.vec<V>(i)                  elements [i, i + V) of contiguous operands (V-aligned when V >
//   1), fn.at(off)                    one element at per-operand element offsets off[0..N).
// When every operand is contiguous and its data pointer is aligned to kVec elements, one thread
// handles kVec elements per 16-byte load and store (the tail of n % kVec elements goes one by
// one). Otherwise (strided, transposed, broadcast operands with stride 0, or unaligned views) the
// dims are collapsed and each operand is addressed through an OffsetCalc (Note [Strided
// addressing on the device]). A broadcast scalar collapses to one dim, so `x + scalar` costs one
// division per element.

#include <array>
#include <cstdint>

#include "tessera/kernels/cuda/launch.cuh"
#include "tessera/runtime/cuda.h"
#include "tessera/runtime/dispatch.h"

namespace tessera::cuda {

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements of T per 16-byte vector.
template <typename T>
inline constexpr int kVecOf = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

template <typename T, int V>
__device__ __forceinline__ Vec<T, V> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, V>*>(p);
}
template <typename T, int V>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, V>& v) {
  *reinterpret_cast<Vec<T, V>*>(p) = v;
}

template <int N>
struct OffsetCalcs {
  OffsetCalc c[N];
};

template <typename Fn>
__global__ void __launch_bounds__(kBlockSize) contiguous_kernel(int64_t n, Fn fn) {
  constexpr int kV = Fn::kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / kV;
  for (int64_t v = tid; v < nvec; v += stride) fn.template vec<kV>(v * kV);
  for (int64_t i = nvec * kV + tid; i < n; i += stride) fn.template vec<1>(i);
}

template <int N, typename Fn>
__global__ void __launch_bounds__(kBlockSize)
    strided_kernel(int64_t n, OffsetCalcs<N> calcs, Fn fn) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    int64_t off[N];
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = calcs.c[k].offset(i);
    fn.at(off);
  }
}

inline bool vec_aligned(const Tensor& t, int vec) {
  const auto addr = reinterpret_cast<uintptr_t>(t.storage()->data()) +
                    static_cast<uintptr_t>(t.storage_offset()) * t.element_size();
  return addr % (static_cast<uintptr_t>(vec) * t.element_size()) == 0;
}

// Runs fn over the elements of operands ts (ts[0] the output; all of its shape) on the current
// stream of their device. See Note [CUDA elementwise loops].
template <int N, typename Fn>
void launch_elementwise(const char* op, const std::array<const Tensor*, N>& ts, const Fn& fn) {
  const int64_t n = ts[0]->numel();
  if (n == 0) return;
  DeviceGuard guard(ts[0]->device());
  const cudaStream_t stream = current_cuda_stream();
  bool contiguous = true;
  for (const Tensor* t : ts)
    contiguous = contiguous && t->is_contiguous() && vec_aligned(*t, Fn::kVec);
  if (contiguous) {
    contiguous_kernel<<<grid_for(n, Fn::kVec), kBlockSize, 0, stream>>>(n, fn);
  } else {
    const CollapsedShape<N> shape = collapse_dims<N>(ts[0]->sizes(), ts);
    OffsetCalcs<N> calcs;
    for (int k = 0; k < N; ++k) calcs.c[k] = offset_calc(shape, k, op);
    strided_kernel<N><<<grid_for(n), kBlockSize, 0, stream>>>(n, calcs, fn);
  }
  TS_CUDA_CHECK_LAUNCH(op);
}

// The family's KernelTable entries: unary and clamp in elementwise_unary.cu, binary and where in
// elementwise_binary.cu (which registers all four).
void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in);
void clamp_kernel(const Tensor& out, const Tensor& in, const Scalar& lo, bool has_lo,
                  const Scalar& hi, bool has_hi);

}  // namespace tessera::cuda
