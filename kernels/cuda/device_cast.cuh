#pragma once
// Storage <-> op-math conversions in device code. runtime/half.h converts on the host only, so
// the CUDA kernels convert Half and BFloat16 here, bit for bit as the host does (round to nearest
// even; a NaN keeps its sign and becomes the host's quiet NaN), so that CUDA results match the
// CPU kernels exactly wherever the math is exact.

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "tessera/kernels/cpu/elementwise_functors.h"
#include "tessera/runtime/half.h"

namespace tessera::cuda {

using cpu::opmath_t;

template <typename T>
inline constexpr bool kIsReducedFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return __half2float(__ushort_as_half(v.bits));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
  } else {
    return static_cast<float>(v);
  }
}

// T from a float, rounded to nearest even (T is Half, BFloat16 or float).
template <typename T>
__device__ __forceinline__ T from_float(float f) {
  if constexpr (std::is_same_v<T, Half>) {
    T h;
    const uint32_t x = __float_as_uint(f);
    h.bits = f != f ? static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7e00u)
                    : __half_as_ushort(__float2half_rn(f));
    return h;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    T h;
    const uint32_t x = __float_as_uint(f);
    h.bits = (x & 0x7fffffffu) > 0x7f800000u
                 ? static_cast<uint16_t>((x >> 16) | 0x40u)
                 : static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
    return h;
  } else {
    return f;
  }
}

template <typename T>
__device__ __forceinline__ opmath_t<T> to_opmath(T v) {
  if constexpr (kIsReducedFloat<T>) {
    return to_float(v);
  } else {
    return v;
  }
}

template <typename T>
__device__ __forceinline__ T from_opmath(opmath_t<T> v) {
  if constexpr (kIsReducedFloat<T>) {
    return from_float<T>(v);
  } else {
    return v;
  }
}

// The CPU copy kernel's conversion (kernels/cpu/copy.cpp): bool is "!= 0 as float", the reduced
// types go through float.
template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return to_float(v) != 0.0f;
  } else if constexpr (kIsReducedFloat<To>) {
    return from_float<To>(to_float(v));
  } else if constexpr (kIsReducedFloat<From>) {
    return static_cast<To>(to_float(v));
  } else {
    return static_cast<To>(v);
  }
}

// The random and arange kernels' int64 -> T (kernels/cpu/random.cpp from_int64).
template <typename T>
__device__ __forceinline__ T from_int64(int64_t v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (kIsReducedFloat<T>) {
    return from_float<T>(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace tessera::cuda
