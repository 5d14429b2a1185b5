#pragma once
// Plain loops over memory: the physical limit that memory-bound ops (a sum over 64 MiB, an
// in-place add) are compared against, as the FMA peak (bench/fma_peak.h) is for products. Each
// loop moves exactly the bytes its op must move, in the widest vectors the CPU reports, split
// across the calling thread's intra-op threads by Tessera's own parallel_for (as the ops split
// theirs), and does nothing else: an op that runs at its loop's rate runs at what the cores and
// the memory give.

#include <atomic>
#include <cstdint>

#include "tessera/runtime/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TS_BENCH_AVX512_LOOPS 1
#include <immintrin.h>
#else
#define TS_BENCH_AVX512_LOOPS 0
#endif

namespace tessera::bench {

namespace memory_rate_detail {

// Where the read loop's sum goes: a result nothing reads would let the compiler drop the loop.
inline volatile float sink;

#if TS_BENCH_AVX512_LOOPS
// Four independent accumulators, so the adds' latency does not bound the loop.
__attribute__((target("avx512f"))) inline float read_avx512(const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[v] = _mm512_add_ps(acc[v], _mm512_loadu_ps(x + i + 16 * v));
  }
  // Folded through memory: _mm512_reduce_add_ps trips GCC 12's -Wuninitialized (PR 105593).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes,
                  _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  float sum = 0;
  for (float v : lanes) sum += v;
  for (; i < n; ++i) sum += x[i];
  return sum;
}

__attribute__((target("avx512f"))) inline void update_avx512(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      float* xv = x + i + 16 * v;
      _mm512_storeu_ps(xv, _mm512_add_ps(_mm512_loadu_ps(xv), _mm512_loadu_ps(y + i + 16 * v)));
    }
  }
  for (; i < n; ++i) x[i] += y[i];
}
#endif

inline float read_range(const float* x, int64_t n) {
#if TS_BENCH_AVX512_LOOPS
  if (__builtin_cpu_supports("avx512f")) return read_avx512(x, n);
#endif
  float acc[4] = {0, 0, 0, 0};
  const int64_t whole = n / 4 * 4;
  for (int64_t i = 0; i < whole; i += 4) {
    for (int v = 0; v < 4; ++v) acc[v] += x[i + v];
  }
  float sum = acc[0] + acc[1] + acc[2] + acc[3];
  for (int64_t i = whole; i < n; ++i) sum += x[i];
  return sum;
}

inline void update_range(float* x, const float* y, int64_t n) {
#if TS_BENCH_AVX512_LOOPS
  if (__builtin_cpu_supports("avx512f")) return update_avx512(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace memory_rate_detail

// Reads x[0, n) once on this thread's intra-op threads: the traffic of a sum.
inline void read_loop(const float* x, int64_t n) {
  std::atomic<float> total{0};
  parallel_for(0, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    total += memory_rate_detail::read_range(x + begin, end - begin);
  });
  memory_rate_detail::sink = total;
}

// x[0, n) += y[0, n) on this thread's intra-op threads: the traffic of an in-place add.
inline void update_loop(float* x, const float* y, int64_t n) {
  parallel_for(0, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    memory_rate_detail::update_range(x + begin, y + begin, end - begin);
  });
}

}  // namespace tessera::bench

#undef TS_BENCH_AVX512_LOOPS
