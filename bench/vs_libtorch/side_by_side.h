#pragma once
// One benchmark case of vs_libtorch: the same computation written against Tessera and against
// libtorch, timed alternately in one process (this VM's speed drifts by tens of percent over
// seconds, so timing one library after the other would measure the drift).

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace tessera::bench::vs_libtorch {

struct Case {
  std::string name;
  double target;                         // the bound on tessera / libtorch
  std::function<void()> tessera;         // one call of the Tessera side
  std::function<void()> libtorch;        // one call of the libtorch side
  std::function<double()> max_rel_diff;  // both sides' results compared after timing
  int calls_per_sample = 1;              // very short cases are timed in batches
  double product_flops = 0;              // float32 FLOPs of its matrix products, if it has any
  // For a case of one float32 product: the GEMM backend the Tessera side ran it on (Note [CPU
  // float32 GEMM choice] in kernels/cpu/linalg.cpp), asked after its rounds at their threads.
  std::function<std::string()> tessera_gemm{};
  // For a memory-bound case: a plain loop moving the same bytes on the Tessera side's buffers
  // (bench/memory_rate.h), timed beside the two sides, and how many bytes that is.
  std::function<void()> plain_loop{};
  double memory_bytes = 0;
};

struct CaseTiming {
  double tessera_s;   // median seconds per call
  double libtorch_s;  // median seconds per call
  double ratio;       // median of the per-round ratios tessera / libtorch
  double plain_s;     // median seconds per call of the case's plain loop (0: it has none)
  // The rounds whose own ratio met the case's target, of all rounds: how far the median's side
  // of the target is the rounds' agreement rather than one coin toss (See Note [Rounds within
  // target]).
  int rounds_within_target;
  int rounds;
};

namespace detail {

// Note [Each sample in its own steady state]
// What a side's call costs right after the other side's calls is not what it costs in a loop
// of its own (a training loop), on this kind of machine at 2 threads especially:
// - the pthread OpenBLAS under libtorch keeps its workers spinning for 2^28 TSC cycles after
//   each call (OPENBLAS_THREAD_TIMEOUT; ~0.1 s at 2.6 GHz) before they sleep: Tessera's calls
//   in that window share a core with one of them, and every barrier waits for it;
// - an idle gap is no cure: on these VMs a core that idled for tens of milliseconds wakes slowly
//   for a while (a 2-thread MLP step took 3.3 ms back to back, 7-14 ms after 50-200 ms sleeps;
//   one thread is unaffected; with OMP_WAIT_POLICY=active it stays at 3.4).
// So a sample first calls its side back to back, untimed, for kSettle (longer than OpenBLAS's
// spin), then times calls_per_sample calls: each side in the steady state of its own loop.
inline constexpr std::chrono::milliseconds kSettle{150};

inline double seconds_per_call(const std::function<void()>& f, int calls) {
  const auto settled = std::chrono::steady_clock::now() + kSettle;
  do {
    f();
  } while (std::chrono::steady_clock::now() < settled);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace detail

// Rounds of A B, then B A, ... after two warm-up calls of each (pages touched, caches and
// allocators warm), each round followed by a sample of the case's plain loop if it has one; each
// sample settles first (See Note [Each sample in its own steady state]).
inline CaseTiming time_case(const Case& c, int rounds) {
  for (int i = 0; i < 2; ++i) {
    c.tessera();
    c.libtorch();
  }
  std::vector<double> a, b, plain, ratios;
  for (int i = 0; i < rounds; ++i) {
    double ta = 0.0;
    double tb = 0.0;
    if (i % 2 == 0) {
      ta = detail::seconds_per_call(c.tessera, c.calls_per_sample);
      tb = detail::seconds_per_call(c.libtorch, c.calls_per_sample);
    } else {
      tb = detail::seconds_per_call(c.libtorch, c.calls_per_sample);
      ta = detail::seconds_per_call(c.tessera, c.calls_per_sample);
    }
    a.push_back(ta);
    b.push_back(tb);
    ratios.push_back(ta / tb);
    if (c.plain_loop) plain.push_back(detail::seconds_per_call(c.plain_loop, c.calls_per_sample));
  }
  const auto within =
      std::count_if(ratios.begin(), ratios.end(), [&](double r) { return r <= c.target; });
  return {detail::median(a),        detail::median(b),
          detail::median(ratios),   plain.empty() ? 0.0 : detail::median(plain),
          static_cast<int>(within), rounds};
}

}  // namespace tessera::bench::vs_libtorch
