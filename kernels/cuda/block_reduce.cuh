#pragma once
// Shared by the CUDA reduction and nn kernels: conversions to the accumulation types,
// deterministic reductions over groups of threads, and the group size for a row length.
//
// Note [Deterministic group reductions]
// A "group" is G adjacent threads along threadIdx.x (G a power of two, blockDim.x == G) that
// together reduce one row; a block holds blockDim.y groups. Each thread first accumulates its
// own strided share of the row, then the group combines the per-thread values in a fixed tree
// (shuffles within a warp, shared memory across warps). The order of every floating operation
// depends only on the launch shape, never on timing, so a kernel gives the same bits run to run;
// no float atomics are used.

#include <cstdint>
#include <type_traits>

#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/launch.cuh"
#include "tessera/runtime/half.h"

namespace tessera::cuda {

template <typename T>
inline constexpr bool kIsDeviceFloat = std::is_floating_point_v<T> || kIsReducedFloat<T>;

// Accumulation type of a storage type: float for half/bfloat16/float, double for double,
// wrapping uint64 for integers and bool (as kernels/cpu/reduction.cpp).
template <typename D>
using acc_of = std::conditional_t<std::is_same_v<D, double>, double,
                                  std::conditional_t<kIsDeviceFloat<D>, float, uint64_t>>;
// Floating math type of a floating storage type (float, or double for double).
template <typename D>
using float_acc_of = std::conditional_t<std::is_same_v<D, double>, double, float>;

// Storage -> math type and back (Half / BFloat16 through kernels/cuda/device_cast.cuh, bit for
// bit as the host converts).
template <typename A, typename T>
__device__ __forceinline__ A load_as(T x) {
  if constexpr (kIsReducedFloat<T>) {
    return static_cast<A>(to_float(x));
  } else {
    return static_cast<A>(x);
  }
}
template <typename T, typename A>
__device__ __forceinline__ T store_as(A x) {
  if constexpr (kIsReducedFloat<T>) {
    return from_float<T>(static_cast<float>(x));
  } else {
    return static_cast<T>(x);
  }
}

// Math of the accumulation types: the float functions for float (never a double round trip),
// the double ones for double.
template <typename A>
__device__ __forceinline__ A exp_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return expf(x);
  } else {
    return ::exp(x);
  }
}
template <typename A>
__device__ __forceinline__ A log_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return logf(x);
  } else {
    return ::log(x);
  }
}
template <typename A>
__device__ __forceinline__ A sqrt_of(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return sqrtf(x);
  } else {
    return ::sqrt(x);
  }
}
template <typename A>
__device__ __forceinline__ A pow_of(A x, A y) {
  if constexpr (std::is_same_v<A, float>) {
    return powf(x, y);
  } else {
    return ::pow(x, y);
  }
}

// Reduces `v` over the group of G threads that holds the calling thread (see Note
// [Deterministic group reductions]); every thread of the group receives the result. `scratch`
// is shared memory of blockDim.x * blockDim.y values. Every thread of the block must call it
// (it synchronizes the block when G > 32).
template <typename V, typename Merge>
__device__ V group_reduce(V v, const Merge& merge, V* scratch) {
  const unsigned g = blockDim.x;
  if (g <= 32) {
    for (unsigned w = g / 2; w > 0; w /= 2) {
      const V other = __shfl_down_sync(0xffffffffu, v, w, g);
      v = merge(v, other);
    }
    return __shfl_sync(0xffffffffu, v, 0, g);
  }
  for (unsigned w = 16; w > 0; w /= 2) v = merge(v, __shfl_down_sync(0xffffffffu, v, w));
  const unsigned tx = threadIdx.x;
  V* row = scratch + threadIdx.y * g;
  if (tx % 32 == 0) row[tx / 32] = v;
  __syncthreads();
  if (tx < 32) {
    const unsigned warps = g / 32;
    V w_v = row[tx < warps ? tx : 0];
    for (unsigned w = 16; w > 0; w /= 2) {
      const V other = __shfl_down_sync(0xffffffffu, w_v, w);
      if (tx + w < warps) w_v = merge(w_v, other);
    }
    if (tx == 0) row[0] = w_v;
  }
  __syncthreads();
  const V result = row[0];
  __syncthreads();  // row[0] may be rewritten by the next call
  return result;
}

// As group_reduce for values that shuffles cannot move (structs): a shared-memory tree.
template <typename V, typename Merge>
__device__ V group_reduce_shared(V v, const Merge& merge, V* scratch) {
  const unsigned g = blockDim.x;
  const unsigned tx = threadIdx.x;
  V* row = scratch + threadIdx.y * g;
  row[tx] = v;
  __syncthreads();
  for (unsigned w = g / 2; w > 0; w /= 2) {
    if (tx < w) row[tx] = merge(row[tx], row[tx + w]);
    __syncthreads();
  }
  const V result = row[0];
  __syncthreads();
  return result;
}

// OffsetCalc::offset without its division in the common single-dim case.
__device__ __forceinline__ int64_t fast_offset(const OffsetCalc& c, int64_t i) {
  return c.ndim == 1 ? i * c.strides[0] : c.offset(i);
}

// The element stride of a row laid along at most one dim (softmax's dim): 0 for a row of one.
__host__ __device__ __forceinline__ int64_t single_dim_stride(const OffsetCalc& c) {
  return c.ndim == 0 ? 0 : c.strides[0];
}

// Threads per row for rows of n elements: a power of two up to a warp for short rows, the whole
// block (kBlockSize) for long ones. blockDim = (group_size, kBlockSize / group_size).
inline unsigned group_size(int64_t n) {
  if (n >= 2048) return kBlockSize;
  unsigned g = 1;
  while (g < 32 && g < n) g *= 2;
  return g;
}

template <typename A>
struct SumOp {
  __device__ A operator()(A a, A b) const { return a + b; }
};
// Max that propagates NaN.
template <typename A>
struct MaxOp {
  __device__ A operator()(A a, A b) const { return (a > b || a != a) ? a : b; }
};

}  // namespace tessera::cuda
