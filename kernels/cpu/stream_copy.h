#pragma once
// Copies that store around the cache, for large outputs.
//
// Note [Streaming stores]
// An output of kStreamBytes or more is written with non-temporal stores, so that the CPU does not
// first read every destination line: that read costs a third more memory traffic for a binary op
// and half more for a unary one or a copy. Results are computed into an L1 block and streamed from
// there. The threshold exceeds the L2 and a core's share of L3 on current servers: an output that
// large is mostly evicted before the next op could read it from cache anyway.

#include <algorithm>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tessera::cpu {

inline constexpr int64_t kStreamBytes = int64_t{16} << 20;

// memcpy with non-temporal stores; call stream_fence() before the data is used.
inline void stream_copy(char* dst, const char* src, int64_t bytes) {
#if defined(__SSE2__)
  int64_t head = static_cast<int64_t>((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  head = std::min(head, bytes);
  std::memcpy(dst, src, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
  std::memcpy(dst + i, src + i, static_cast<size_t>(bytes - i));
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

// Orders the streamed stores before anything the caller does next.
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace tessera::cpu
