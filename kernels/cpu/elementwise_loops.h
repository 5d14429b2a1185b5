#pragma once
// The memory walks that the elementwise kernel files share (kernels/cpu/elementwise.cpp,
// kernels/cpu/elementwise_backward.cpp): Note [Elementwise inner loops] in elementwise.cpp, and
// conversions between storage and op-math buffers.

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "tessera/kernels/cpu/loops.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/half.h"
#include "tessera/runtime/half_convert.h"
#include "tessera/runtime/parallel.h"
#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// Elements per op-math buffer: a few KiB, so that the buffers of an op stay in L1.
inline constexpr int64_t kOpMathBlock = 256;

inline bool all_strides_zero(const Tensor& t) {
  return std::all_of(t.strides().begin(), t.strides().end(), [](int64_t s) { return s == 0; });
}

// Inputs smaller than this are read in place by staged_input: the strided run costs less than a
// copy's call.
inline constexpr int64_t kStageMinElements = 4096;

// in, or a row-major copy of it (made in `copy`) when out's last dim has unit stride and in's (of
// out's shape, broadcast dims with stride 0) is neither unit nor 0 (Note [Inputs read across the
// grain] in elementwise.cpp). An input broadcast along another dim is read in place: the copy
// would expand it. An undefined input (an absent operand) comes back as it is. Returns a
// reference, so that the common case adds no reference-count traffic to a one-element op.
inline const Tensor& staged_input(const Tensor& out, const Tensor& in, Tensor& copy) {
  if (!in.defined()) return in;
  const int64_t nd = in.dim();
  if (nd < 2 || in.numel() < kStageMinElements || in.size(nd - 1) == 1) return in;
  if (out.stride(nd - 1) != 1 || in.stride(nd - 1) == 1 || in.stride(nd - 1) == 0) return in;
  for (int64_t d = 0; d < nd; ++d) {
    if (in.size(d) != 1 && in.stride(d) == 0) return in;
  }
  copy = Tensor::make_empty(in.sizes(), in.dtype(), in.device());
  kernels(DeviceType::CPU, "copy").copy(copy, in);
  return copy;
}

// See Note [Elementwise inner loops].
template <size_t N, typename Inner>
void for_each_element(const std::array<const Tensor*, N>& ts, const Inner& inner) {
  const int64_t numel = ts[0]->numel();
  if (numel == 0) return;
  std::array<int64_t, N> step{};
  for (size_t k = 0; k < N; ++k) {
    if (ts[k]->is_contiguous()) {
      step[k] = static_cast<int64_t>(ts[k]->element_size());
    } else if (!all_strides_zero(*ts[k])) {
      for_each_strided<N>(ts, inner);
      return;
    }
  }
  std::array<char*, N> base;
  for (size_t k = 0; k < N; ++k) base[k] = static_cast<char*>(ts[k]->raw_data());
  parallel_for(0, numel, kElementwiseGrain, [&](int64_t b, int64_t e) {
    std::array<char*, N> p;
    for (size_t k = 0; k < N; ++k) p[k] = base[k] + b * step[k];
    inner(p, step, e - b);
  });
}

// Contiguous float16 and bfloat16 convert in bulk (runtime/half_convert.h).
template <typename T, typename C>
void gather(C* dst, const char* src, int64_t stride, int64_t n) {
  if constexpr (std::is_same_v<T, Half> && std::is_same_v<C, float>) {
    if (stride == sizeof(Half)) {
      return ::tessera::detail::halves_to_floats(reinterpret_cast<const Half*>(src), dst, n);
    }
  }
  if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<C, float>) {
    if (stride == sizeof(BFloat16)) {
      return ::tessera::detail::bfloat16s_to_floats(reinterpret_cast<const BFloat16*>(src), dst, n);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<C>(*reinterpret_cast<const T*>(src + i * stride));
}

template <typename T, typename C>
void scatter(char* dst, int64_t stride, const C* src, int64_t n) {
  if constexpr (std::is_same_v<T, Half> && std::is_same_v<C, float>) {
    if (stride == sizeof(Half)) {
      return ::tessera::detail::floats_to_halves(src, reinterpret_cast<Half*>(dst), n);
    }
  }
  if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<C, float>) {
    if (stride == sizeof(BFloat16)) {
      return ::tessera::detail::floats_to_bfloat16s(src, reinterpret_cast<BFloat16*>(dst), n);
    }
  }
  for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(dst + i * stride) = static_cast<T>(src[i]);
}

}  // namespace tessera::cpu
