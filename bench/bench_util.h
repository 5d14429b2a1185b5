#pragma once
// Small helpers shared by the benchmarks: steady-state timing and table printing.

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::bench {

// Runs f a few times to reach steady state (pages touched, caches warm), then reports the median
// seconds per call over `reps` timed calls.
inline double time_median(const std::function<void()>& f, int reps, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  t.reserve(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[static_cast<size_t>(reps / 2)];
}

// Seconds per call of a very short operation, timed in batches of n calls.
inline double time_per_call(const std::function<void()>& f, int n) {
  return time_median(
             [&] {
               for (int i = 0; i < n; ++i) f();
             },
             7, 1) /
         n;
}

// A rows x cols float32 matrix of values in [-1, 1) from an LCG seeded with `seed`: benchmarks
// must not depend on ts::rand.
inline Tensor uniform_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  Tensor t = Tensor::make_empty({rows, cols}, kFloat32, Device::cpu());
  float* p = t.data_ptr<float>();
  uint64_t s = seed;
  for (int64_t i = 0; i < rows * cols; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<float>(static_cast<double>(s >> 40) / 8388608.0 - 1.0);
  }
  return t;
}

}  // namespace tessera::bench
