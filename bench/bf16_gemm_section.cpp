// bfloat16 products on oneDNN beside the AMX kernels (bench/bf16_gemm_section.h): the figures
// behind amx_bf16_preferred (Note [AMX bfloat16 products] in kernels/cpu/amx_matmul.cpp).

#include "bench/bf16_gemm_section.h"

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include "tessera/kernels/cpu/amx_matmul.h"
#include "tessera/kernels/cpu/omp_threads.h"
#include "tessera/kernels/cpu/onednn_matmul.h"

namespace tessera::bench {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

void run_bf16_gemm_section() {
  if (!cpu::amx_bf16_matmul_available()) {
    fmt::print(
        "\nbfloat16 GEMM: no AMX kernels here (the CPU lacks AMX-BF16 or the kernel refused the "
        "tile state): every bfloat16 product runs on oneDNN\n");
    return;
  }
  // M x K x N: squares, and the rectangles around the rule's edge.
  const std::vector<std::array<int64_t, 3>> shapes = {
      {256, 256, 256},   {512, 512, 512},    {1024, 1024, 1024}, {2048, 2048, 2048},
      {256, 1024, 1024}, {512, 1024, 1024},  {1024, 256, 1024},  {1024, 1024, 256},
      {1024, 512, 512},  {4096, 1024, 1024}, {64, 1024, 1024}};
  for (const int threads : {1, 2}) {
    // The kernels called directly run on the calling thread's OpenMP thread count.
    const cpu::OmpThreadsGuard guard(threads);
    fmt::print("\nbfloat16 GEMM GFLOP/s, {} thread(s); medians over alternating rounds\n", threads);
    fmt::print("  {:>16} {:>9} {:>9} {:>10}  {:<10}\n", "M x K x N", "onednn", "amx", "amx/onednn",
               "matmul uses");
    for (const auto& [m, k, n] : shapes) {
      // Standard normal values, as weights and activations are: the tiles' rate depends on the
      // data (bench/vs_libtorch's operands are these too).
      const Tensor a = randn({m, k}).to(kBFloat16), b = randn({k, n}).to(kBFloat16);
      const Tensor out = Tensor::make_empty({m, n}, kBFloat16, Device::cpu());
      const double gflop = 2e-9 * static_cast<double>(m * k * n);
      // ~0.2 s of oneDNN per variant at ~1 TFLOP/s per thread, 5 to 200 rounds.
      const int rounds = std::clamp(static_cast<int>(0.2 / (gflop / 1000.0 / threads)), 5, 200);
      std::array<std::vector<double>, 2> seconds;
      for (int r = -2; r < rounds; ++r) {  // two rounds of warm-up
        for (int j = 0; j < 2; ++j) {
          const int v = (j + r + 2) % 2;
          const auto t0 = std::chrono::steady_clock::now();
          const bool ran = v == 0 ? cpu::onednn_matmul(out, a, b) : cpu::amx_bf16_matmul(out, a, b);
          const std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
          if (ran && r >= 0) seconds[static_cast<size_t>(v)].push_back(t.count());
        }
      }
      if (seconds[0].empty() || seconds[1].empty()) {
        fmt::print("  {:>16} a backend declined the product\n", fmt::format("{}x{}x{}", m, k, n));
        continue;
      }
      const double onednn = median(seconds[0]), amx = median(seconds[1]);
      fmt::print("  {:>16} {:>9.0f} {:>9.0f} {:>10.2f}  {:<10}\n", fmt::format("{}x{}x{}", m, k, n),
                 gflop / onednn, gflop / amx, amx / onednn,
                 cpu::amx_bf16_preferred(m, n, k, 1, threads) ? "amx" : "onednn");
    }
  }
}

}  // namespace tessera::bench
