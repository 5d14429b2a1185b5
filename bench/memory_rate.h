#pragma once
// Plain loops over memory: the physical limit that memory-bound ops (a sum over 64 MiB, an
// in-place add) are compared against, as the FMA peak (bench/fma_peak.h) is for products. Each
// loop moves exactly the bytes its op must move, in the widest vectors the CPU reports, cut into
// one contiguous range per OpenMP thread as Tessera's parallel_for cuts an op's work, and does
// nothing else: an op that runs at its loop's rate runs at what the cores and the memory give.

#include <omp.h>

#include <algorithm>
#include <cstdint>

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

// The range of thread t of `threads` over n elements, cut at multiples of 64 floats.
struct Range {
  int64_t begin, end;
};
inline Range thread_range(int64_t n, int t, int threads) {
  const int64_t lines = (n + 63) / 64;
  return {std::min(n, lines * t / threads * 64), std::min(n, lines * (t + 1) / threads * 64)};
}

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
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int v = 0; v < 4; ++v) acc[v] += x[i + v];
  }
  float sum = acc[0] + acc[1] + acc[2] + acc[3];
  for (; i < n; ++i) sum += x[i];
  return sum;
}

inline void update_range(float* x, const float* y, int64_t n) {
#if TS_BENCH_AVX512_LOOPS
  if (__builtin_cpu_supports("avx512f")) return update_avx512(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace memory_rate_detail

// Reads x[0, n) once on `threads` threads: the traffic of a sum.
inline void read_loop(const float* x, int64_t n, int threads) {
  using namespace memory_rate_detail;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const Range r = thread_range(n, omp_get_thread_num(), omp_get_num_threads());
    total += read_range(x + r.begin, r.end - r.begin);
  }
  sink = total;
}

// x[0, n) += y[0, n) on `threads` threads: the traffic of an in-place add.
inline void update_loop(float* x, const float* y, int64_t n, int threads) {
  using namespace memory_rate_detail;
#pragma omp parallel num_threads(threads)
  {
    const Range r = thread_range(n, omp_get_thread_num(), omp_get_num_threads());
    update_range(x + r.begin, y + r.begin, r.end - r.begin);
  }
}

}  // namespace tessera::bench

#undef TS_BENCH_AVX512_LOOPS
