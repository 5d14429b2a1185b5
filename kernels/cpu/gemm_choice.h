#pragma once
// The CPU float32 GEMM backends and the per-process choice among them, made in
// kernels/cpu/linalg.cpp (See Note [CPU float32 GEMM choice] there). Internal to Tessera: the
// tests and benchmarks use it to run each backend, and to see what the choice was.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// kNarrow: Tessera's own kernels for outputs of at most 16 columns (kernels/cpu/narrow_matmul.h).
// kTiles: Tessera's own register-tile kernels for every shape (kernels/cpu/tile_matmul.h).
enum class GemmBackend { kOneDnn, kOpenBlas, kEigen, kNarrow, kTiles };

// "onednn", "openblas", "eigen", "narrow", "tiles": the names TESSERA_CPU_GEMM takes.
std::string_view gemm_backend_name(GemmBackend backend);

// Whether this build has the backend and this CPU runs it (Eigen always).
bool gemm_backend_available(GemmBackend backend);

// The value of TESSERA_CPU_GEMM: "auto" (nullopt) or a backend's name. Throws Error naming the
// variable, the value and the valid values when the value is none of them or names a backend
// this build lacks.
std::optional<GemmBackend> parse_gemm_backend(std::string_view value);

// Forces this thread's float32 matmuls onto `backend` while it lives (the backend must be
// available), over TESSERA_CPU_GEMM; nullopt restores the process's choice. Nests.
class GemmBackendOverride {
 public:
  explicit GemmBackendOverride(std::optional<GemmBackend> backend);
  ~GemmBackendOverride();
  GemmBackendOverride(const GemmBackendOverride&) = delete;
  GemmBackendOverride& operator=(const GemmBackendOverride&) = delete;

 private:
  std::optional<GemmBackend> saved_;
};

// The backend a batch of `batch` m x k @ k x n float32 products on `threads` OpenMP threads, of
// dense operands (contiguous, or the transpose of contiguous) in the given layouts, with
// linear's bias added where `bias`, runs on in this thread: the override, else TESSERA_CPU_GEMM,
// else the measured choice for its shape class (measuring it now if no product of the class has
// yet). Strided operands are classes of their own (Note [CPU float32 GEMM choice] in
// kernels/cpu/linalg.cpp).
GemmBackend chosen_gemm_backend(int64_t m, int64_t n, int64_t k, int threads,
                                bool a_row_major = true, bool b_row_major = true, int64_t batch = 1,
                                bool bias = false);

// The backend tessera::matmul(a, b) runs on in this thread for float32 operands of at least two
// dims with equal batch dims (views as they come: a strided head is its own class), measuring
// the class now if no product of it has yet.
GemmBackend chosen_gemm_backend(const Tensor& a, const Tensor& b);

// The dims {m, n, k} a product too large to be its own trial is timed at, on scratch operands:
// the largest dim halved until at most 2^29 multiply-adds remain, K first where dims tie, then M
// (Note [CPU float32 GEMM choice] in kernels/cpu/linalg.cpp). Its batch is cut after.
std::array<int64_t, 3> scratch_trial_dims(int64_t m, int64_t n, int64_t k);

// One float32 product as the CPU matmul kernels ran it: a batch of m x k @ k x n products, the
// operands' layouts as the backend read them, whether the kernel added linear's bias (in the
// product's pass on oneDNN and the tile kernels, a pass after on the others: Note [Bias in the
// product] in kernels/cpu/linalg.cpp), the backend, and its wall time (the bias's pass included,
// the choice's trials not).
struct GemmRecord {
  int64_t batch, m, n, k;
  bool a_row_major, b_row_major, bias;
  GemmBackend backend;
  double seconds;
};

// While an observer is installed, every float32 product of the CPU matmul kernels is timed and
// reported to it on the thread that ran the product (so it must be thread-safe where products
// run on several threads, as the ranks of the threads backend do). For measuring tools
// (bench/step_products_bench.cpp): two clock reads per product while installed, one relaxed
// load when not. Installing replaces the previous observer; an empty function removes it.
void set_gemm_observer(std::function<void(const GemmRecord&)> observer);

}  // namespace tessera::cpu
