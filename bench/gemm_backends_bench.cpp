// CPU float32 GEMM backends side by side (Note [CPU float32 GEMM choice] in
// kernels/cpu/linalg.cpp): GFLOP/s of tessera::matmul forced onto each backend this build has
// (oneDNN, OpenBLAS, Eigen, the narrow kernels on outputs of at most 16 columns, "-" elsewhere,
// and the tile kernels) and on its measured choice ("auto"), on the MLP's products (256 x 512
// input, 1024 hidden, 10 outputs: forward, weight gradient X^T @ dY, input gradient dY @ W^T), the
// transformer block's of bench/vs_libtorch (512 tokens, 256 features, MLP 1024, weights [out, in]
// as nn.Linear keeps them; attention's 64 heads of 64 x 32 on a fused qkv tensor) and 1024 /
// 2048 squares, at 1 and 2 intra-op threads. The variants alternate round by round (medians), as
// this VM's speed drifts over seconds. The last column is the best backend's rate as a fraction
// of the threads' FMA peak, measured at the start (bench/fma_peak.h). "choice ms" is what
// measuring the choice cost the first product of its shape class (0 when an earlier product of
// the class measured it). Then the bfloat16 backends: oneDNN beside the AMX kernels
// (bench/bf16_gemm_section.h).

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/bf16_gemm_section.h"
#include "bench/fma_peak.h"
#include "tessera/kernels/cpu/gemm_choice.h"
#include "tessera/kernels/cpu/narrow_matmul.h"

namespace ts = tessera;
using ts::cpu::GemmBackend;

namespace {

struct Problem {
  std::string name;
  ts::Tensor a, b;  // possibly transposed or strided views, as autograd passes them
};

// The block's heads: [tokens / 64 sequences, 8 heads, 64, 32] views of a fused [512, 768] tensor.
ts::Tensor heads(const ts::Tensor& qkv, int64_t part) {
  return qkv.narrow(-1, part * 256, 256).reshape({8, 64, 8, 32}).transpose(1, 2);
}

// The MLP with weights [in, out] (x @ w): forward, weight gradient x^T @ dy and input gradient
// dy @ w^T of each layer, the transposes as the views autograd passes; then the squares.
std::vector<Problem> problems() {
  const int64_t batch = 256, in = 512, hidden = 1024, out = 10;
  const ts::Tensor x = ts::bench::uniform_matrix(batch, in, 1),
                   w1 = ts::bench::uniform_matrix(in, hidden, 2);
  const ts::Tensor h = ts::bench::uniform_matrix(batch, hidden, 3),
                   dh = ts::bench::uniform_matrix(batch, hidden, 4);
  const ts::Tensor w2 = ts::bench::uniform_matrix(hidden, out, 5),
                   dy = ts::bench::uniform_matrix(batch, out, 6);
  std::vector<Problem> p = {
      {"fc1 x @ w1", x, w1}, {"fc1 x^T @ dh", x.t(), dh}, {"fc1 dh @ w1^T", dh, w1.t()},
      {"fc2 h @ w2", h, w2}, {"fc2 h^T @ dy", h.t(), dy}, {"fc2 dy @ w2^T", dy, w2.t()},
  };
  const int64_t tokens = 512, model = 256, mlp = 1024;
  const ts::Tensor t = ts::bench::uniform_matrix(tokens, model, 11),
                   qkv_w = ts::bench::uniform_matrix(3 * model, model, 12),
                   fc1_w = ts::bench::uniform_matrix(mlp, model, 13),
                   u = ts::bench::uniform_matrix(tokens, mlp, 14),
                   du = ts::bench::uniform_matrix(tokens, mlp, 15),
                   qkv = ts::bench::uniform_matrix(tokens, 3 * model, 16);
  const ts::Tensor scores = ts::bench::uniform_matrix(64 * 64, 64, 17).reshape({8, 8, 64, 64});
  p.push_back({"block qkv x @ W^T", t, qkv_w.t()});
  p.push_back({"block fc1 x @ W^T", t, fc1_w.t()});
  p.push_back({"block fc1 du @ W", du, fc1_w});
  p.push_back({"block fc1 du^T @ x", du.t(), t});
  p.push_back({"block fc2 u @ W^T", u, fc1_w});
  p.push_back({"heads q @ k^T", heads(qkv, 0), heads(qkv, 1).transpose(-2, -1)});
  p.push_back({"heads p @ v", scores, heads(qkv, 2)});
  p.push_back({"heads p^T @ dy", scores.transpose(-2, -1), heads(qkv, 2)});
  for (const int64_t n : {1024, 2048}) {
    p.push_back({fmt::format("square {}", n), ts::bench::uniform_matrix(n, n, 8),
                 ts::bench::uniform_matrix(n, n, 9)});
  }
  return p;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  std::vector<std::optional<GemmBackend>> variants;  // nullopt: the measured choice
  std::vector<std::string> names;
  for (GemmBackend backend : {GemmBackend::kOneDnn, GemmBackend::kOpenBlas, GemmBackend::kEigen,
                              GemmBackend::kNarrow, GemmBackend::kTiles}) {
    if (ts::cpu::gemm_backend_available(backend)) {
      variants.emplace_back(backend);
      names.emplace_back(ts::cpu::gemm_backend_name(backend));
    } else {
      fmt::print("({} not in this build)\n", ts::cpu::gemm_backend_name(backend));
    }
  }
  variants.emplace_back(std::nullopt);
  names.emplace_back("auto");

  const double peak = ts::bench::fma_peak_gflops();
  fmt::print("FMA peak of one thread, measured: {:.1f} GFLOP/s\n", peak);
  for (const int threads : {1, 2}) {
    ts::set_num_threads(threads);
    fmt::print("\nfloat32 GEMM GFLOP/s, {} thread(s); medians over alternating rounds\n", threads);
    fmt::print("  {:<22} {:>16}", "product", "M x K x N");
    for (const std::string& n : names) fmt::print(" {:>9}", n);
    fmt::print("  {:<9} {:>10}  {:>10}  {:>9}\n", "auto uses", "auto/best", "choice ms",
               "best/peak");
    for (const Problem& p : problems()) {
      const int64_t m = p.a.size(-2), k = p.a.size(-1), n = p.b.size(-1);
      const int64_t batch = p.a.numel() / (m * k);
      const double gflop = 2e-9 * static_cast<double>(batch * m * k * n);
      // Rounds: ~0.3 s of the fastest backend per variant, at least 5.
      const int rounds = std::clamp(static_cast<int>(0.3 / (gflop / 150.0 * 2 / threads)), 5, 60);
      // The first product of its class (and thread count) measures the choice: its cost.
      const auto c0 = std::chrono::steady_clock::now();
      const GemmBackend chosen = ts::cpu::chosen_gemm_backend(p.a, p.b);
      const double choice_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
      // The narrow kernels decline wider outputs (the product would time Eigen's fallback).
      const auto serves = [&](size_t v) {
        return variants[v] != GemmBackend::kNarrow || n <= ts::cpu::kNarrowGemmMaxN;
      };
      std::vector<std::vector<double>> seconds(variants.size());
      for (size_t v = 0; v < variants.size(); ++v) {
        if (!serves(v)) continue;
        const ts::cpu::GemmBackendOverride force(variants[v]);
        for (int w = 0; w < 2; ++w) ts::Tensor c = ts::matmul(p.a, p.b);  // warm-up
      }
      for (int r = 0; r < rounds; ++r) {
        for (size_t j = 0; j < variants.size(); ++j) {
          const size_t v = (j + static_cast<size_t>(r)) % variants.size();
          if (!serves(v)) continue;
          const ts::cpu::GemmBackendOverride force(variants[v]);
          const auto t0 = std::chrono::steady_clock::now();
          ts::Tensor c = ts::matmul(p.a, p.b);
          seconds[v].push_back(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
      }
      const std::string dims = fmt::format("{}x{}x{}", m, k, n);
      fmt::print("  {:<22} {:>16}", p.name, batch > 1 ? fmt::format("{} x {}", batch, dims) : dims);
      double best_backend = 0;
      for (size_t v = 0; v < variants.size(); ++v) {
        if (!serves(v)) {
          fmt::print(" {:>9}", "-");
          continue;
        }
        const double g = gflop / median(seconds[v]);
        if (variants[v]) best_backend = std::max(best_backend, g);
        fmt::print(" {:>9.1f}", g);
      }
      fmt::print("  {:<9} {:>10.2f}  {:>10.1f}  {:>9.2f}\n", ts::cpu::gemm_backend_name(chosen),
                 gflop / median(seconds.back()) / best_backend, choice_ms,
                 best_backend / (peak * threads));
    }
  }
  ts::bench::run_bf16_gemm_section();
  return 0;
}
