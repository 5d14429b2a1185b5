// Does the core run its float32 products at the clock of the FMA peak? A VM exposes no cycle
// counters (perf stat: cycles not supported), so the clock is timed on a chain of dependent
// integer multiplies (3 cycles of latency each on current x86 cores, Intel and AMD alike), run
// right after each kind of work: a clock that drops under AVX-512 or under memory traffic keeps
// its lower level for milliseconds after, far longer than the chain takes. For each backend and
// one training step's large product shapes it prints the product's rate, the clock after it, and
// the rate as a share of the FMA peak at that clock: a share well under 1 at an unchanged clock
// says the cycles go to stalls, not to a lower clock.
//
// usage: clock_probe_bench [--seconds S]   (per measurement, default 0.3; one thread)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "tessera/kernels/cpu/gemm_choice.h"
#include "tessera/tessera.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace {

using Clock = std::chrono::steady_clock;
namespace ts = tessera;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// GHz, from 2^21 dependent 64-bit multiplies (~2 ms): each waits for the one before.
double clock_ghz() {
  constexpr long kMultiplies = long{1} << 21;
  constexpr double kLatencyCycles = 3.0;
  long x = 3;
  const auto t0 = Clock::now();
  for (long i = 0; i < kMultiplies; i += 8) {
    asm volatile(
        "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\t"
        "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0"
        : "+r"(x));
  }
  return kLatencyCycles * static_cast<double>(kMultiplies) / seconds_since(t0) / 1e9;
}

}  // namespace
#endif

int main(int argc, char** argv) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  double seconds = 0.3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S]\n", argv[0]);
      return 2;
    }
  }
  ts::set_num_threads(1);

  // The FMA loop for `seconds`, then the clock: the peak's own clock.
  double peak = 0.0;
  for (const auto t0 = Clock::now(); seconds_since(t0) < seconds;) {
    peak = std::max(peak, ts::bench::fma_peak_gflops(1));
  }
  const double peak_clock = clock_ghz();
  const double flops_per_cycle = peak / peak_clock;
  std::printf(
      "one thread: the FMA loop at %.1f GFLOP/s with the clock at %.2f GHz (%.1f FLOP per "
      "cycle)\n\n",
      peak, peak_clock, flops_per_cycle);
  std::printf(
      "| product (M x K x N) | backend  | GFLOP/s | clock after | of the peak at that clock |\n"
      "|---------------------|----------|---------|-------------|---------------------------|\n");

  struct Shape {
    int64_t m, k, n;
  };
  // The MLP's first layer and the transformer block's MLP products (bench/step_products_bench).
  const std::vector<Shape> shapes = {{256, 512, 1024}, {512, 256, 1024}, {512, 1024, 256}};
  for (const Shape& s : shapes) {
    const ts::Tensor a = ts::randn({s.m, s.k}), b = ts::randn({s.k, s.n});
    for (ts::cpu::GemmBackend backend :
         {ts::cpu::GemmBackend::kOneDnn, ts::cpu::GemmBackend::kOpenBlas,
          ts::cpu::GemmBackend::kTiles}) {
      if (!ts::cpu::gemm_backend_available(backend)) continue;
      const ts::cpu::GemmBackendOverride force(backend);
      ts::Tensor c = ts::matmul(a, b);  // warm: the backend's first call sets itself up
      long products = 0;
      const auto t0 = Clock::now();
      double elapsed = 0.0;
      while (elapsed < seconds) {
        c = ts::matmul(a, b);
        ++products;
        elapsed = seconds_since(t0);
      }
      const double clock = clock_ghz();
      const double rate = 2.0 * static_cast<double>(products * s.m * s.k * s.n) / elapsed / 1e9;
      std::printf("| %4lldx%4lldx%4lld      | %-8s | %7.1f | %7.2f GHz | %25.2f |\n",
                  static_cast<long long>(s.m), static_cast<long long>(s.k),
                  static_cast<long long>(s.n),
                  std::string(ts::cpu::gemm_backend_name(backend)).c_str(), rate, clock,
                  rate / (flops_per_cycle * clock));
    }
  }
  return 0;
#else
  (void)argc;
  (void)argv;
  std::printf(
      "clock_probe_bench: x86-64 with GCC or Clang only (an inline-assembly multiply "
      "chain); nothing measured\n");
  return 0;
#endif
}
