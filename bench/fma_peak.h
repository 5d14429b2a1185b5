#pragma once
// The float32 FMA peak of one core, measured: the physical limit a GEMM and a training step's
// products are compared against. A VM hides the clock, so the peak is timed on a loop of
// independent FMAs (12 accumulators, more than latency x throughput on current x86 cores) at the
// widest vector the CPU reports: AVX-512F, else AVX2 + FMA, else none (0).

#include <chrono>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace tessera::bench {

namespace fma_peak_detail {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
constexpr int kAccumulators = 12;
constexpr long kSteps = 4'000'000;  // ~0.03 s at 100 GFLOP/s

// Where each loop's sum goes: a result nothing reads would let the compiler drop the loop.
inline volatile float sink;

// GFLOP/s of kSteps steps of kAccumulators independent FMAs of `lanes` floats.
template <typename Step>
double rate(int lanes, const Step& step) {
  const auto t0 = std::chrono::steady_clock::now();
  sink = step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * lanes * kAccumulators * static_cast<double>(kSteps) / s / 1e9;
}

__attribute__((target("avx512f,fma"))) inline float avx512_loop() {
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.9999f), y = _mm512_set1_ps(1e-5f);
  for (long s = 0; s < kSteps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  alignas(64) float lanes[16];
  float sum = 0;
  for (int i = 0; i < kAccumulators; ++i) {
    _mm512_store_ps(lanes, acc[i]);
    for (float v : lanes) sum += v;
  }
  return sum;
}

__attribute__((target("avx2,fma"))) inline float avx2_loop() {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.9999f), y = _mm256_set1_ps(1e-5f);
  for (long s = 0; s < kSteps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  alignas(32) float lanes[8];
  float sum = 0;
  for (int i = 0; i < kAccumulators; ++i) {
    _mm256_store_ps(lanes, acc[i]);
    for (float v : lanes) sum += v;
  }
  return sum;
}
#endif

}  // namespace fma_peak_detail

// GFLOP/s one thread reaches on float32 FMAs: the best of `tries` timings (a busy VM only slows a
// try down). 0 where no FMA vector unit is known.
inline double fma_peak_gflops(int tries = 5) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  using namespace fma_peak_detail;
  double best = 0;
  for (int t = 0; t < tries; ++t) {
    double r = 0;
    if (__builtin_cpu_supports("avx512f")) {
      r = rate(16, avx512_loop);
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      r = rate(8, avx2_loop);
    }
    best = r > best ? r : best;
  }
  return best;
#else
  (void)tries;
  return 0;
#endif
}

}  // namespace tessera::bench
