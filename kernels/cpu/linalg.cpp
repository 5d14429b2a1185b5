// CPU matmul: float32 through oneDNN, OpenBLAS or Eigen, whichever measured fastest for the
// shape on this CPU (See Note [CPU float32 GEMM choice]); bfloat16 and float16 through oneDNN's
// matmul primitive (computed in float32 where this CPU has no oneDNN kernel for them); float64
// and integers through Eigen's products.

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/kernels/cpu/amx_matmul.h"
#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/gemm_choice.h"
#include "tessera/kernels/cpu/narrow_matmul.h"
#include "tessera/kernels/cpu/omp_threads.h"
#include "tessera/kernels/cpu/onednn_matmul.h"
#include "tessera/kernels/cpu/openblas_matmul.h"
#include "tessera/kernels/cpu/thread_team.h"
#include "tessera/kernels/cpu/tile_matmul.h"
#include "tessera/runtime/parallel.h"

namespace tessera::cpu {

// Note [CPU float32 GEMM choice]
// No one float32 GEMM is fastest on every CPU Tessera runs on: on the project's AMD EPYC (AVX-512)
// machines, oneDNN 2.6's f32 matmul (brg:avx512_core) was reported at ~100 GFLOP/s on one thread
// where OpenBLAS 0.3.21 reaches ~166, while on Intel Xeons oneDNN's blocking is the one tuned for
// the caches; which wins also changes with the shape (bench/gemm_backends_bench.cpp prints each
// backend side by side). On CPUs with AVX-512F Tessera's own kernels are candidates too: the
// register-tile kernels on every shape (Note [Register-tile float32 products] in
// tile_matmul.cpp), which won attention's strided heads by 1.3-1.6x and tied linear's x @ W^T,
// and the narrow kernels on outputs of at most 16 columns (Note [Narrow float32 products] in
// narrow_matmul.cpp).
// So the backend is measured, not guessed, on the CPU the process runs on:
// - Shape classes: each of M, N, K falls in one of four ranges (<= 16, <= 128, <= 512, larger),
//   and the class is the three ranges with the OpenMP thread count the product runs on (the
//   winner at one thread need not be the winner at two), the operands' layouts, row- or
//   column-major as the product passes them (autograd's x^T views), whether each operand is
//   dense (its matrices packed: a contiguous tensor or its transpose) or a strided view,
//   whether the product is one matrix or a batch, and whether it adds linear's bias (timed with
//   it: Note [Bias in the product]): a backend's rate on a transposed operand need
//   not be its rate on a row-major one, and attention's q @ k^T (64 products of 64 x 32 x 64,
//   q and k heads of one fused qkv tensor, rows 768 floats apart) ran at 49 GFLOP/s on oneDNN
//   and 61 on OpenBLAS on one EPYC thread, the same product on dense copies at 90 and 64.
// - The first float32 product of a class times the backends this build has: on the product
//   itself when it has at most 2^27 multiply-adds (268 MFLOP; every backend writes the same
//   result, so the trial is also the product, and the operands' real strides are timed), else
//   on dense scratch operands of its layouts with its largest dims halved (and its batch cut)
//   to 2^29 (1.07 GFLOP, such as 1024 x 1024 x 512): the class of dims over 512 holds 1024 and
//   2048 squares, and cut to 512^3 its trial picked oneDNN at two Xeon threads where the tile
//   kernels ran 1024^3 and 2048^3 5-7% faster. Where dims tie K is halved first, then M: the
//   threads split a product by its output (columns, else rows), and K only repeats its blocks of
//   depth, so the trial keeps the output's shape longest. Cut M first (512 x 1024 x 1024), the
//   trial picked oneDNN in 8-11 of 40 at two Xeon threads, where the tiles ran 1024^3 and 2048^3
//   3-7% faster; cut K first (1024 x 1024 x 512), the tiles in 28-30 of 30. Each backend runs
//   the product once untimed first: its first run pays once-per-process costs (oneDNN's
//   primitive, the first touch of packing buffers: 1.7-9.2 ms against 0.83-1.1 after, on the
//   MLP's 512 x 256 x 1024 at two Xeon threads), and with it among three timed runs the median
//   was the slower of the other two, so one slow run more decided the class. Then rounds in
//   rotating order, at least three and on short products as many as fit in 4 ms (up to 50), each
//   backend's median run counting: on a short product at two threads a backend's own variance
//   (waking its second thread) is part of what the product costs. On more than one thread the trial
//   first waits for the OpenMP team to be awake (Note [Trials on a waking thread team] in
//   thread_team.cpp): on a waking VM core every backend timed alike and the pick was random. The
//   winner serves the class for the rest of the process (one process-wide table, so every rank
//   thread gets the same answer). The trial keeps the shape rather than a fixed one per class
//   because a factor of two in one dim flips the winner: on the EPYC at one thread, 256 x 512 x 10
//   (M x K x N) runs at 68 GFLOP/s on oneDNN and 47 on OpenBLAS, 256 x 1024 x 10 at 33 and 46; and
//   a backend's rank differs between CPUs: the tile kernels ran the MLP's 256 x 10 x 1024 (K = 10)
//   at 0.8x oneDNN on one EPYC thread and at 1.3x on one Xeon thread (49-56 against 65-100 us
//   inside the step), so they are timed on shallow products too. Eigen is timed only on trials of
//   at most 64^3 multiply-adds: on larger ones it ran at a third or less of oneDNN's and OpenBLAS's
//   rate on every shape of the bench (and would triple the cost). Cost: four runs each (one
//   untimed) of oneDNN, OpenBLAS and the tile kernels on <= 268 MFLOP, ~33 ms at the EPYC's ~100
//   GFLOP/s per thread (~120 ms for a class of products over 268 MFLOP, whose trial is 1.07 GFLOP:
//   less than one of them), about 5 ms for the MLP's 10-wide layer (gemm_backends_bench prints it
//   as "choice ms"; a loaded machine stretches it); a training step touches a handful of classes.
// - TESSERA_CPU_GEMM=onednn|openblas|eigen|narrow|tiles forces a backend (auto: the measured
//   choice); GemmBackendOverride forces one per thread for the tests and benchmarks.
// - Threads: Debian's OpenBLAS is the pthread build, whose thread count is process-global and
//   whose concurrent multi-threaded calls queue on one pool. Rank threads call matmul
//   concurrently, each with its own intra-op thread count; so OpenBLAS runs at one thread
//   while a Tessera product is inside it (every call then runs on its caller, and OpenBLAS locks
//   its buffer pool for concurrent callers in this build; the application's count comes back
//   after, See Note [OpenBLAS's process-wide thread count] in kernels/cpu/openblas_matmul.cpp)
//   and openblas_matmul splits the product over the caller's OpenMP threads itself: no lock is
//   held across a product, so none serializes the ranks.
// A backend that declines a problem (oneDNN without an optimized kernel for the layout, OpenBLAS
// with dims beyond 32 bits, the narrow kernels on more than 16 columns) hands it to Eigen.
// linear's bias rides in the product on oneDNN and the tile kernels (Note [Bias in the product]).
// tools/shardbench's calibration times matmul at one thread through this same choice, so its
// one-thread figure is the backend the ranks get.

namespace {

// Multiply-adds worth a thread: starting a parallel region costs microseconds, about what a
// thread needs for this much work, so smaller products run on fewer threads.
constexpr int64_t kWorkPerThread = int64_t{1} << 18;

// A contiguous copy of t in `dtype`, except that batch dims t broadcasts (stride 0) stay
// broadcast instead of being replicated.
Tensor compact_copy(const Tensor& t, DType dtype) {
  Shape sizes = t.sizes();
  for (int64_t d = 0; d < t.dim() - 2; ++d) {
    if (t.stride(d) == 0) sizes[d] = 1;
  }
  Tensor base = Tensor::make_view(t.storage(), sizes, t.strides(), t.storage_offset(), t.dtype());
  Tensor copy = Tensor::make_empty(sizes, dtype, t.device());
  copy.copy_(base);
  return copy.expand(t.sizes());
}

// Operands in a layout oneDNN and Eigen read in place (see onednn_matmul): a matrix without a
// unit stride is copied, and so is a where a batch dim is broadcast in both a and b.
std::pair<Tensor, Tensor> blas_operands(const Tensor& a, const Tensor& b) {
  Tensor pa = blas_layout(a) ? a : compact_copy(a, a.dtype());
  Tensor pb = blas_layout(b) ? b : compact_copy(b, b.dtype());
  for (int64_t d = 0; d < a.dim() - 2; ++d) {
    if (a.size(d) > 1 && pa.stride(d) == 0 && pb.stride(d) == 0) {
      pa = pa.contiguous();
      break;
    }
  }
  return {pa, pb};
}

template <typename T, int Order>
using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>,
                                  Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using OutMatrixMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// The storage orders are template parameters so that Eigen multiplies transposed operands in
// place (a runtime stride in both dims would make it copy each operand first).
template <typename T, int OrderA, int OrderB>
void eigen_batches(const Tensor& out, const Tensor& a, const Tensor& b, int64_t lda, int64_t ldb) {
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  const int64_t batch = out.numel() / (m * n);
  const std::vector<int64_t> off_a = batch_offsets(a, batch);
  const std::vector<int64_t> off_b = batch_offsets(b, batch);
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  T* pc = static_cast<T*>(out.raw_data());
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ConstMatrixMap<T, OrderA> ma(pa + off_a[static_cast<size_t>(i)], m, k,
                                   Eigen::OuterStride<>(lda));
      ConstMatrixMap<T, OrderB> mb(pb + off_b[static_cast<size_t>(i)], k, n,
                                   Eigen::OuterStride<>(ldb));
      OutMatrixMap<T> mc(pc + i * m * n, m, n);
      mc.noalias() = ma * mb;
    }
  };
  // Small products: threads take groups of batches. Large ones: Eigen threads each product.
  const int64_t work = m * n * k;
  if (batch > 1 && work < kWorkPerThread) {
    parallel_for(0, batch, std::max<int64_t>(1, kWorkPerThread / work), run);
  } else {
    run(0, batch);
  }
}

// out = a @ b for operands in BLAS layout (see blas_operands).
template <typename T>
void eigen_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  const MatrixLayout la = *blas_layout(a);
  const MatrixLayout lb = *blas_layout(b);
  constexpr int kRow = Eigen::RowMajor, kCol = Eigen::ColMajor;
  if (la.row_major && lb.row_major) {
    eigen_batches<T, kRow, kRow>(out, a, b, la.ld, lb.ld);
  } else if (la.row_major) {
    eigen_batches<T, kRow, kCol>(out, a, b, la.ld, lb.ld);
  } else if (lb.row_major) {
    eigen_batches<T, kCol, kRow>(out, a, b, la.ld, lb.ld);
  } else {
    eigen_batches<T, kCol, kCol>(out, a, b, la.ld, lb.ld);
  }
}

constexpr const char* kGemmEnv = "TESSERA_CPU_GEMM";
constexpr std::array<GemmBackend, 5> kGemmBackends = {GemmBackend::kOneDnn, GemmBackend::kOpenBlas,
                                                      GemmBackend::kEigen, GemmBackend::kNarrow,
                                                      GemmBackend::kTiles};

// out += bias on every row of out (contiguous), as the elementwise add `out += bias` runs it.
void add_bias_rows(const Tensor& out, const Tensor& bias) {
  kernels(DeviceType::CPU, "linear").binary(BinaryOp::kAdd, out, out, bias.expand(out.sizes()));
}

// out = a @ b (+ bias on every row where defined; float32, operands in BLAS layout) on
// `backend`, the bias in the product's own pass on oneDNN and the tile kernels (Note [Bias in
// the product]) and a pass after it on the others; false, computing nothing, when it declines.
bool run_gemm_backend(GemmBackend backend, const Tensor& out, const Tensor& a, const Tensor& b,
                      const Tensor& bias = Tensor()) {
  bool ran = false;
  switch (backend) {
    case GemmBackend::kOneDnn:
      return onednn_matmul(out, a, b, bias);
    case GemmBackend::kTiles:
      return tile_matmul(out, a, b, bias);
    case GemmBackend::kOpenBlas:
      ran = openblas_matmul(out, a, b);
      break;
    case GemmBackend::kEigen:
      eigen_matmul<float>(out, a, b);
      ran = true;
      break;
    case GemmBackend::kNarrow:
      ran = narrow_matmul(out, a, b);
      break;
  }
  if (ran && bias.defined()) add_bias_rows(out, bias);
  return ran;
}

// Upper bounds of the per-dim ranges of Note [CPU float32 GEMM choice], and the most
// multiply-adds a trial product may have.
constexpr std::array<int64_t, 3> kDimLimits = {16, 128, 512};
constexpr int64_t kTrialWork = int64_t{1} << 27;
// The size a larger product's trial on scratch operands is cut to (see the Note).
constexpr int64_t kScratchTrialWork = int64_t{1} << 29;

int dim_range(int64_t d) {
  int r = 0;
  while (r < static_cast<int>(kDimLimits.size()) && d > kDimLimits[static_cast<size_t>(r)]) ++r;
  return r;
}

// Eigen's product runs at a third or less of the others' rate on the large classes (see the Note):
// it is timed only where a product is small enough for call overheads to decide.
constexpr int64_t kEigenTrialWork = int64_t{64} * 64 * 64;

// What the measured choice keys on (see the Note): M, N, K ranges, threads, and per operand
// whether it is row-major and whether it is dense (its matrices packed, as a contiguous tensor
// or its transpose, rather than a strided view such as one attention head of a fused qkv),
// whether the product is batched, and whether it adds linear's bias.
struct GemmClass {
  std::array<int, 3> dim_ranges;
  int threads;
  bool a_row_major, b_row_major;
  bool a_dense, b_dense;
  bool batched;
  bool bias;
  auto operator<=>(const GemmClass&) const = default;
};

// Whether t's matrices are packed: t contiguous, or the transpose of a contiguous tensor (its
// last two dims swapped). Read off the strides, without a transposed view: this runs per product.
bool dense_operand(const Tensor& t) {
  if (t.is_contiguous()) return true;
  const int64_t nd = t.dim();
  int64_t expected = 1;  // the stride a dim of size > 1 must have, innermost (dim -2) outward
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = i == 0 ? nd - 2 : (i == 1 ? nd - 1 : nd - 1 - i);
    if (t.size(d) != 1 && t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

// Times the available backends on out = a @ b (+ bias where defined, as run_gemm_backend adds it;
// float32, operands in BLAS layout) on the calling thread's OpenMP threads, at least min_rounds
// rounds; out holds the product after.
GemmBackend fastest_gemm_backend(const Tensor& out, const Tensor& a, const Tensor& b,
                                 const Tensor& bias, int min_rounds = 3) {
  const int64_t work = out.numel() * a.size(-1);
  std::vector<GemmBackend> candidates;
  for (GemmBackend backend : kGemmBackends) {
    if (!gemm_backend_available(backend)) continue;
    if (backend == GemmBackend::kEigen && work > kEigenTrialWork) continue;
    if (backend == GemmBackend::kNarrow && out.size(-1) > kNarrowGemmMaxN) continue;
    candidates.push_back(backend);
  }
  if (candidates.empty()) return GemmBackend::kEigen;
  if (candidates.size() == 1) return candidates.front();
  wait_until_thread_team_awake();  // Note [Trials on a waking thread team]
  // Each backend's first run pays what it pays once per process (oneDNN's primitive, the
  // packing buffers' first touch): untimed, and a backend that declines it drops out.
  std::erase_if(candidates,
                [&](GemmBackend backend) { return !run_gemm_backend(backend, out, a, b, bias); });
  if (candidates.size() <= 1) return candidates.empty() ? GemmBackend::kEigen : candidates.front();
  std::vector<std::vector<double>> runs(candidates.size());
  // Rounds and statistic: Note [CPU float32 GEMM choice].
  constexpr int kMaxRounds = 50;
  constexpr double kTrialSeconds = 4e-3;
  double spent = 0.0;
  for (int round = 0; round < kMaxRounds && (round < min_rounds || spent < kTrialSeconds);
       ++round) {
    for (size_t j = 0; j < candidates.size(); ++j) {
      const size_t i = (j + static_cast<size_t>(round)) % candidates.size();
      const auto t0 = std::chrono::steady_clock::now();
      run_gemm_backend(candidates[i], out, a, b, bias);  // it took this product untimed
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
      runs[i].push_back(t.count());
      spent += t.count();
    }
  }
  std::vector<double> typical(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::nth_element(runs[i].begin(), runs[i].begin() + runs[i].size() / 2, runs[i].end());
    typical[i] = runs[i][runs[i].size() / 2];
  }
  return candidates[static_cast<size_t>(std::min_element(typical.begin(), typical.end()) -
                                        typical.begin())];
}

}  // namespace

std::array<int64_t, 3> scratch_trial_dims(int64_t m, int64_t n, int64_t k) {
  const std::array<int64_t*, 3> halving_order{&k, &m, &n};
  while (m * n * k > kScratchTrialWork) {
    int64_t* largest = halving_order[0];
    for (int64_t* dim : halving_order) {
      if (*dim > *largest) largest = dim;
    }
    *largest = (*largest + 1) / 2;
  }
  return {m, n, k};
}

namespace {

// Times the backends on dense scratch operands of a batch of m x k @ k x n products in the given
// layouts (with a bias when `bias`), cut to scratch_trial_dims (and the batch cut) to at most
// kScratchTrialWork multiply-adds.
GemmBackend fastest_on_scratch(int64_t batch, int64_t m, int64_t n, int64_t k, bool a_row_major,
                               bool b_row_major, bool bias) {
  const std::array<int64_t, 3> dims = scratch_trial_dims(m, n, k);
  m = dims[0], n = dims[1], k = dims[2];
  batch = std::clamp<int64_t>(kScratchTrialWork / (m * n * k), 1, batch);
  const Device cpu = Device::cpu();
  const Tensor a = a_row_major ? Tensor::make_empty({batch, m, k}, kFloat32, cpu)
                               : Tensor::make_empty({batch, k, m}, kFloat32, cpu).transpose(1, 2);
  const Tensor b = b_row_major ? Tensor::make_empty({batch, k, n}, kFloat32, cpu)
                               : Tensor::make_empty({batch, n, k}, kFloat32, cpu).transpose(1, 2);
  // Values of ordinary magnitude (no denormals, no overflow), the same for every backend.
  std::fill_n(static_cast<float*>(a.raw_data()), batch * m * k, 0.5f);
  std::fill_n(static_cast<float*>(b.raw_data()), batch * k * n, 0.25f);
  Tensor scratch_bias;
  if (bias) {
    scratch_bias = Tensor::make_empty({n}, kFloat32, cpu);
    std::fill_n(static_cast<float*>(scratch_bias.raw_data()), n, 0.125f);
  }
  // Five rounds: the large classes' backends come within a few percent of each other, and with
  // three the VM's drift picked a different winner of 2048^3 in one run of three.
  return fastest_gemm_backend(Tensor::make_empty({batch, m, n}, kFloat32, cpu), a, b, scratch_bias,
                              5);
}

// TESSERA_CPU_GEMM, read once per process.
std::optional<GemmBackend> env_gemm_backend() {
  static const std::optional<GemmBackend> forced = []() -> std::optional<GemmBackend> {
    const char* value = std::getenv(kGemmEnv);
    if (value == nullptr) return std::nullopt;
    return parse_gemm_backend(value);
  }();
  return forced;
}

thread_local std::optional<GemmBackend> t_gemm_override;

// The measured choice per class, for the whole process: measuring under the lock makes every
// thread that needs a class wait for its one measurement instead of measuring it again. Each
// thread keeps the answers it has seen, so after the first product of a class the hot path takes
// no lock (rank threads multiply concurrently). `measure` times the class's trial. The override,
// else TESSERA_CPU_GEMM, come first. The maps live outside the template: a function-local static
// of a template is one per instantiation, and each caller's `measure` lambda is its own type, so
// the products and chosen_gemm_backend would each measure a class once and could disagree.
std::mutex chosen_mutex;
std::map<GemmClass, GemmBackend> chosen_per_class;
thread_local std::map<GemmClass, GemmBackend> t_seen_per_class;

template <typename Measure>
GemmBackend chosen_for_class(const GemmClass& cls, const Measure& measure) {
  if (t_gemm_override) return *t_gemm_override;
  if (const std::optional<GemmBackend> forced = env_gemm_backend()) return *forced;
  if (const auto hit = t_seen_per_class.find(cls); hit != t_seen_per_class.end()) {
    return hit->second;
  }
  std::lock_guard<std::mutex> lock(chosen_mutex);
  auto it = chosen_per_class.find(cls);
  if (it == chosen_per_class.end()) it = chosen_per_class.emplace(cls, measure()).first;
  t_seen_per_class.emplace(cls, it->second);
  return it->second;
}

// The backend for out = a @ b (+ bias where defined; float32, operands in BLAS layout,
// non-empty): the override, else TESSERA_CPU_GEMM, else the measured choice for its class. The
// first product of a class is its own trial when it is at most kTrialWork multiply-adds (its
// operands' strides are the class's real ones); a larger one is timed on dense scratch operands
// of its shape, cut down.
GemmBackend gemm_backend_for(const Tensor& out, const Tensor& a, const Tensor& b,
                             const Tensor& bias) {
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  const int64_t batch = out.numel() / (m * n);
  const bool a_row_major = blas_layout(a)->row_major, b_row_major = blas_layout(b)->row_major;
  const GemmClass cls{{dim_range(m), dim_range(n), dim_range(k)},
                      omp_get_max_threads(),
                      a_row_major,
                      b_row_major,
                      dense_operand(a),
                      dense_operand(b),
                      batch > 1,
                      bias.defined()};
  return chosen_for_class(cls, [&] {
    return batch * m * n * k <= kTrialWork
               ? fastest_gemm_backend(out, a, b, bias)
               : fastest_on_scratch(batch, m, n, k, a_row_major, b_row_major, bias.defined());
  });
}

// The observer of set_gemm_observer: `observing` spares the hot path the mutex when none is
// installed.
std::atomic<bool> observing{false};
std::mutex observer_mutex;
std::shared_ptr<const std::function<void(const GemmRecord&)>> observer;

// Runs `run` (the product out = a @ b, operands in BLAS layout, returning the backend that ran it
// or nullopt when the backend declined it) and reports it to the observer when one is installed.
template <typename Run>
std::optional<GemmBackend> observed_product(const Tensor& out, const Tensor& a, const Tensor& b,
                                            bool bias, const Run& run) {
  if (!observing.load(std::memory_order_relaxed)) return run();
  std::shared_ptr<const std::function<void(const GemmRecord&)>> report;
  {
    std::lock_guard<std::mutex> lock(observer_mutex);
    report = observer;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<GemmBackend> ran = run();
  const std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;
  if (ran && report) {
    const int64_t m = out.size(-2), n = out.size(-1);
    (*report)(GemmRecord{out.numel() / (m * n), m, n, a.size(-1), blas_layout(a)->row_major,
                         blas_layout(b)->row_major, bias, *ran, t.count()});
  }
  return ran;
}

// float32 (operands in BLAS layout; + bias where defined) on the chosen backend.
void float32_matmul(const Tensor& out, const Tensor& a, const Tensor& b,
                    const Tensor& bias = Tensor()) {
  const GemmBackend backend = gemm_backend_for(out, a, b, bias);
  observed_product(out, a, b, bias.defined(), [&] {
    if (run_gemm_backend(backend, out, a, b, bias)) return backend;
    run_gemm_backend(GemmBackend::kEigen, out, a, b, bias);  // Eigen takes every product
    return GemmBackend::kEigen;
  });
}

// float32, bfloat16, float16 (operands in BLAS layout).
void floating_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.dtype() == kFloat32) {
    float32_matmul(out, a, b);
    return;
  }
  // bfloat16 on AMX tiles where they beat oneDNN (Note [AMX bfloat16 products] in amx_matmul.cpp).
  const int64_t m = out.size(-2), n = out.size(-1);
  if (out.dtype() == kBFloat16 &&
      amx_bf16_preferred(m, n, a.size(-1), out.numel() / (m * n), omp_get_max_threads()) &&
      amx_bf16_matmul(out, a, b)) {
    return;
  }
  if (onednn_matmul(out, a, b)) return;
  // oneDNN has no optimized kernel for this reduced-precision dtype here: compute in float32.
  Tensor out32 = Tensor::make_empty(out.sizes(), kFloat32, out.device());
  floating_matmul(out32, compact_copy(a, kFloat32), compact_copy(b, kFloat32));
  kernels(DeviceType::CPU, "matmul").copy(out, out32);
}

// OpenMP threads for the product out = a @ b: small ones run on fewer.
int product_threads(const Tensor& out, const Tensor& a) {
  const int64_t work = out.numel() * a.size(-1);
  return static_cast<int>(std::clamp<int64_t>(work / kWorkPerThread, 1, get_num_threads()));
}

void matmul_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  TS_INTERNAL_ASSERT(a.dtype() == out.dtype() && b.dtype() == out.dtype(),
                     "[matmul] kernel called with dtypes ", a.dtype(), ", ", b.dtype(), " -> ",
                     out.dtype());
  if (out.numel() == 0) return;
  if (a.size(-1) == 0) {  // every element is an empty sum
    kernels(DeviceType::CPU, "matmul").fill(out, Scalar(int64_t{0}));
    return;
  }
  OmpThreadsGuard threads(product_threads(out, a));
  const auto operands = blas_operands(a, b);
  const Tensor& pa = operands.first;
  const Tensor& pb = operands.second;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16> ||
                  std::is_same_v<T, Half>) {
      floating_matmul(out, pa, pb);
    } else if constexpr (std::is_same_v<T, bool>) {
      TS_INTERNAL_ASSERT(false, "[matmul] kernel called with bool tensors");
    } else {
      eigen_matmul<T>(out, pa, pb);
    }
  });
}

// Note [Bias in the product]
// linear's bias rides in oneDNN's epilogue, and in the tile kernels' first store of each tile,
// while each output tile is still in registers: adding it afterwards is one more pass over an
// output that is often larger than L2 (a transformer block's 512 x 1024 MLP activation: 0.19 ms
// of a 2.7 ms product on one EPYC thread). On the other backends the kernel adds it in a pass
// after the product. A product with a bias is a class of its own in the measured choice, timed
// with the bias added as each backend adds it: timed without it, a trial could pick OpenBLAS by
// less than its bias pass then costs (attention's output projection, 512 x 256 x 256 with a
// transposed weight, ran on OpenBLAS in one Xeon block step, its bias a second pass over the
// output).
bool matmul_bias_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  if (out.dtype() != kFloat32 || out.numel() == 0 || a.size(-1) == 0) return false;
  OmpThreadsGuard threads(product_threads(out, a));
  const auto [pa, pb] = blas_operands(a, b);
  float32_matmul(out, pa, pb, bias);
  return true;
}

}  // namespace

std::string_view gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kOneDnn:
      return "onednn";
    case GemmBackend::kOpenBlas:
      return "openblas";
    case GemmBackend::kEigen:
      return "eigen";
    case GemmBackend::kNarrow:
      return "narrow";
    case GemmBackend::kTiles:
      return "tiles";
  }
  return "?";
}

bool gemm_backend_available(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kOneDnn:
      return onednn_available();
    case GemmBackend::kOpenBlas:
      return openblas_available();
    case GemmBackend::kEigen:
      return true;
    case GemmBackend::kNarrow:
      return narrow_matmul_available();
    case GemmBackend::kTiles:
      return tile_matmul_available();
  }
  return false;
}

std::optional<GemmBackend> parse_gemm_backend(std::string_view value) {
  if (value == "auto") return std::nullopt;
  std::string valid = "auto";
  for (GemmBackend backend : kGemmBackends) {
    if (!gemm_backend_available(backend)) continue;
    if (value == gemm_backend_name(backend)) return backend;
    valid += tessera::detail::concat_message(", ", gemm_backend_name(backend));
  }
  std::string_view why = "is not a backend";
  for (GemmBackend backend : kGemmBackends) {
    if (value == gemm_backend_name(backend)) why = "names a backend this build or this CPU lacks";
  }
  throw Error(tessera::detail::concat_message("[matmul] ", kGemmEnv, "=", value, " ", why,
                                              "; valid values: ", valid));
}

GemmBackendOverride::GemmBackendOverride(std::optional<GemmBackend> backend)
    : saved_(t_gemm_override) {
  TS_CHECK(!backend || gemm_backend_available(*backend), "[matmul] the CPU GEMM backend ",
           gemm_backend_name(*backend), " is not in this build");
  t_gemm_override = backend;
}

GemmBackendOverride::~GemmBackendOverride() { t_gemm_override = saved_; }

GemmBackend chosen_gemm_backend(int64_t m, int64_t n, int64_t k, int threads, bool a_row_major,
                                bool b_row_major, int64_t batch, bool bias) {
  TS_INTERNAL_ASSERT(m > 0 && n > 0 && k > 0 && threads > 0 && batch > 0,
                     "[matmul] GEMM backend asked for an empty product or no threads");
  const GemmClass cls{{dim_range(m), dim_range(n), dim_range(k)},
                      threads,
                      a_row_major,
                      b_row_major,
                      true,
                      true,
                      batch > 1,
                      bias};
  return chosen_for_class(cls, [&] {
    const OmpThreadsGuard guard(threads);
    return fastest_on_scratch(batch, m, n, k, a_row_major, b_row_major, bias);
  });
}

void set_gemm_observer(std::function<void(const GemmRecord&)> fn) {
  std::lock_guard<std::mutex> lock(observer_mutex);
  observer =
      fn ? std::make_shared<const std::function<void(const GemmRecord&)>>(std::move(fn)) : nullptr;
  observing.store(observer != nullptr, std::memory_order_relaxed);
}

GemmBackend chosen_gemm_backend(const Tensor& a, const Tensor& b) {
  TS_INTERNAL_ASSERT(a.dtype() == kFloat32 && b.dtype() == kFloat32 && a.dim() >= 2 &&
                         b.dim() == a.dim() && a.size(-1) == b.size(-2) && a.numel() > 0 &&
                         b.numel() > 0,
                     "[matmul] GEMM backend asked for operands ", a.sizes(), " ", a.dtype(), " @ ",
                     b.sizes(), " ", b.dtype());
  Shape out_shape = a.sizes();
  out_shape[out_shape.size() - 1] = b.size(-1);
  const Tensor out = Tensor::make_empty(out_shape, kFloat32, a.device());
  const OmpThreadsGuard threads(product_threads(out, a));
  const auto [pa, pb] = blas_operands(a, b);
  return gemm_backend_for(out, pa, pb, Tensor());
}

void register_linalg_kernels(KernelTable& table) {
  table.matmul = matmul_kernel;
  table.matmul_bias = matmul_bias_kernel;
}

}  // namespace tessera::cpu
