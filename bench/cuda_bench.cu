// CUDA benchmark: Tessera's elementwise add against the device's own copy bandwidth, and
// Tessera's matmul against cuBLASLt and cuBLAS called directly here on the same operands.
//
// All figures are steady state: buffers are allocated once and reused, each measurement is
// warmed up, then timed with CUDA events on the current stream as the median of several batches.
// Bandwidth counts the bytes an op must move: a device memcpy of N bytes moves 2N (read + write),
// c = a + b moves 3N. "fresh" is `a + b` as users write it: the output comes from the caching
// allocator on every call (Tessera has no out= variant), so that allocation is part of the
// measured op; "prealloc" calls the CUDA add kernel into an output allocated once.
//
//   cuda_bench          prints a table
//   cuda_bench --csv    prints machine-readable lines (tools/gpu-check.sh parses them):
//     device,<name>,<driver version>,<runtime version>,<compute capability>,<SMs>
//     bw,<what>,<dtype>,<bytes per operand>,<ms>,<GB/s>
//     gemm,<who>,<dtype>,<M=N=K>,<ms>,<TFLOP/s>
//     check,<dtype>,<M=N=K>,<max |tessera - cublaslt| / max |cublaslt|>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"

namespace ts = tessera;

namespace {

constexpr int64_t kMemcpyBytes = int64_t{1} << 30;
constexpr int64_t kAddBytes = int64_t{256} << 20;
// cuBLAS's recommended workspace on Hopper.
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

void check_cuda(cudaError_t e, const char* expr) {
  if (e != cudaSuccess) {
    throw std::runtime_error(fmt::format("[cuda_bench] {} failed: {} ({})", expr,
                                         cudaGetErrorString(e), cudaGetErrorName(e)));
  }
}
void check_cublas(cublasStatus_t s, const char* expr) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("[cuda_bench] {} failed: {} ({})", expr,
                                         cublasGetStatusString(s), static_cast<int>(s)));
  }
}
#define BENCH_CUDA(expr) check_cuda((expr), #expr)
#define BENCH_CUBLAS(expr) check_cublas((expr), #expr)

cudaStream_t current_stream() {
  return static_cast<cudaStream_t>(ts::cuda::current_stream().handle());
}

// Milliseconds per call of f: `warmup` calls, then the median over `batches` batches of `iters`
// calls each, timed by events on the current stream (f queues its work there).
template <typename F>
double time_ms(F&& f, int iters, int batches = 5, int warmup = 3) {
  cudaStream_t stream = current_stream();
  for (int i = 0; i < warmup; ++i) f();
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> samples;
  for (int b = 0; b < batches; ++b) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) f();
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(static_cast<double>(ms) / iters);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  std::nth_element(samples.begin(), samples.begin() + batches / 2, samples.end());
  return samples[static_cast<size_t>(batches / 2)];
}

// Prints either the human table or the CSV lines.
struct Report {
  bool csv = false;
  // dt: the element type, "-" for untyped bytes.
  void bw(const std::string& what, std::string_view dt, int64_t bytes, double ms, double moved,
          double ref_gbps) const {
    const double gbps = moved / (ms * 1e-3) / 1e9;
    if (csv) {
      fmt::print("bw,{},{},{},{:.4f},{:.1f}\n", what, dt, bytes, ms, gbps);
    } else if (ref_gbps > 0) {
      fmt::print("  {:<14} {:<9} {:>9.3f} ms {:>8.1f} GB/s {:>6.1f}% of memcpy\n", what, dt, ms,
                 gbps, 100.0 * gbps / ref_gbps);
    } else {
      fmt::print("  {:<14} {:<9} {:>9.3f} ms {:>8.1f} GB/s\n", what, dt, ms, gbps);
    }
  }
  void gemm(const std::string& who, ts::DType dtype, int64_t n, double ms, double ref_tflops,
            double* tflops_out = nullptr) const {
    const double tflops = 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3) / 1e12;
    if (tflops_out) *tflops_out = tflops;
    if (csv) {
      fmt::print("gemm,{},{},{},{:.4f},{:.1f}\n", who, ts::dtype_name(dtype), n, ms, tflops);
    } else if (ref_tflops > 0) {
      fmt::print("  {:<9} {:<9} {:>5}^3 {:>9.3f} ms {:>7.1f} TFLOP/s {:>6.1f}% of cuBLASLt\n", who,
                 ts::dtype_name(dtype), n, ms, tflops, 100.0 * tflops / ref_tflops);
    } else {
      fmt::print("  {:<9} {:<9} {:>5}^3 {:>9.3f} ms {:>7.1f} TFLOP/s\n", who, ts::dtype_name(dtype),
                 n, ms, tflops);
    }
  }
};

ts::Tensor cuda_empty(const ts::Shape& shape, ts::DType dtype) {
  return ts::empty(shape, ts::TensorOptions().dtype(dtype).device(ts::Device::cuda()));
}

// Uniform [0, 1) operands made on the CPU and copied over, so that the figures do not depend on
// the CUDA random kernels.
ts::Tensor cuda_rand(const ts::Shape& shape, ts::DType dtype) {
  return ts::rand(shape).to(dtype).to(ts::Device::cuda());
}

double bench_memcpy(const Report& report) {
  ts::Tensor src = cuda_empty({kMemcpyBytes}, ts::kUInt8);
  ts::Tensor dst = cuda_empty({kMemcpyBytes}, ts::kUInt8);
  cudaStream_t stream = current_stream();
  const double ms = time_ms(
      [&] {
        BENCH_CUDA(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), kMemcpyBytes,
                                   cudaMemcpyDeviceToDevice, stream));
      },
      10);
  const double moved = 2.0 * static_cast<double>(kMemcpyBytes);
  report.bw("memcpy", "-", kMemcpyBytes, ms, moved, 0);
  return moved / (ms * 1e-3) / 1e9;
}

void bench_add(const Report& report, ts::DType dtype, double memcpy_gbps) {
  const int64_t n = kAddBytes / static_cast<int64_t>(ts::element_size(dtype));
  ts::Tensor a = cuda_rand({n}, dtype);
  ts::Tensor b = cuda_rand({n}, dtype);
  ts::Tensor c = cuda_empty({n}, dtype);
  const ts::KernelTable& k = ts::kernels(ts::DeviceType::CUDA, "cuda_bench");
  const double moved = 3.0 * static_cast<double>(kAddBytes);
  const double fresh = time_ms([&] { ts::Tensor r = a + b; }, 20);
  report.bw("add_fresh", ts::dtype_name(dtype), kAddBytes, fresh, moved, memcpy_gbps);
  const double prealloc = time_ms([&] { k.binary(ts::BinaryOp::kAdd, c, a, b); }, 20);
  report.bw("add_prealloc", ts::dtype_name(dtype), kAddBytes, prealloc, moved, memcpy_gbps);
}

// The row-major product out[M, N] = a[M, K] @ b[K, N] is the column-major product
// out^T = b^T a^T, which is how both cuBLAS calls below see it (no transposes).
struct Gemm {
  int64_t n;
  cudaDataType_t type;
  const void* a;
  const void* b;
  void* out;
};

class LtMatmul {
 public:
  LtMatmul(cublasLtHandle_t lt, const Gemm& g, void* workspace) : lt_(lt), g_(g), ws_(workspace) {
    BENCH_CUBLAS(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BENCH_CUBLAS(cublasLtMatrixLayoutCreate(&layout_, g.type, g.n, g.n, g.n));
    cublasLtMatmulPreference_t pref;
    BENCH_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    BENCH_CUBLAS(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &kLtWorkspaceBytes, sizeof(kLtWorkspaceBytes)));
    int found = 0;
    BENCH_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc_, layout_, layout_, layout_, layout_, pref,
                                                1, &heuristic_, &found));
    BENCH_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
    if (found == 0) throw std::runtime_error("[cuda_bench] cuBLASLt found no algorithm");
  }
  ~LtMatmul() {
    cublasLtMatrixLayoutDestroy(layout_);
    cublasLtMatmulDescDestroy(desc_);
  }
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void operator()() const {
    const float alpha = 1, beta = 0;
    BENCH_CUBLAS(cublasLtMatmul(lt_, desc_, &alpha, g_.b, layout_, g_.a, layout_, &beta, g_.out,
                                layout_, g_.out, layout_, &heuristic_.algo, ws_, kLtWorkspaceBytes,
                                current_stream()));
  }

 private:
  cublasLtHandle_t lt_;
  Gemm g_;
  void* ws_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_ = nullptr;  // all three matrices are n x n, leading dim n
  cublasLtMatmulHeuristicResult_t heuristic_{};
};

void gemm_ex(cublasHandle_t handle, const Gemm& g) {
  const float alpha = 1, beta = 0;
  const int n = static_cast<int>(g.n);
  BENCH_CUBLAS(cublasSetStream(handle, current_stream()));
  BENCH_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, g.b, g.type, n, g.a,
                            g.type, n, &beta, g.out, g.type, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

// max |x - ref| / max |ref| on the CPU, in float64.
double relative_difference(const ts::Tensor& x, const ts::Tensor& ref) {
  ts::Tensor xc = x.cpu().to(ts::kFloat64);
  ts::Tensor rc = ref.cpu().to(ts::kFloat64);
  const double diff = ts::amax(ts::abs(xc - rc)).item<double>();
  const double scale = ts::amax(ts::abs(rc)).item<double>();
  return scale > 0 ? diff / scale : diff;
}

void bench_gemm(const Report& report, cublasLtHandle_t lt, cublasHandle_t handle, void* workspace,
                ts::DType dtype, int64_t n) {
  ts::Tensor a = cuda_rand({n, n}, dtype);
  ts::Tensor b = cuda_rand({n, n}, dtype);
  ts::Tensor ref = cuda_empty({n, n}, dtype);
  const Gemm g{n, dtype == ts::kBFloat16 ? CUDA_R_16BF : CUDA_R_32F, a.raw_data(), b.raw_data(),
               ref.raw_data()};
  // Each batch a few tens of milliseconds at H200 rates.
  const int iters = dtype == ts::kBFloat16 ? (n >= 8192 ? 20 : 100) : (n >= 8192 ? 4 : 20);

  LtMatmul lt_matmul(lt, g, workspace);
  double lt_tflops = 0;
  report.gemm("cublaslt", dtype, n, time_ms(lt_matmul, iters), 0, &lt_tflops);
  report.gemm("cublas", dtype, n, time_ms([&] { gemm_ex(handle, g); }, iters), lt_tflops);
  lt_matmul();  // ref holds cuBLASLt's product for the check below
  ts::Tensor out;
  report.gemm("tessera", dtype, n, time_ms([&] { out = ts::matmul(a, b); }, iters), lt_tflops);
  const double rel = relative_difference(out, ref);
  if (report.csv) {
    fmt::print("check,{},{},{:.3e}\n", ts::dtype_name(dtype), n, rel);
  } else {
    fmt::print("  tessera vs cublaslt: max |difference| / max |value| = {:.3e}\n", rel);
  }
}

void run(const Report& report) {
  int device = 0;
  BENCH_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  BENCH_CUDA(cudaDriverGetVersion(&driver));
  BENCH_CUDA(cudaRuntimeGetVersion(&runtime));
  std::string name = prop.name;
  std::replace(name.begin(), name.end(), ',', ' ');
  if (report.csv) {
    fmt::print("device,{},{},{},{}.{},{}\n", name, driver, runtime, prop.major, prop.minor,
               prop.multiProcessorCount);
  } else {
    fmt::print("{} (sm_{}{}, {} SMs), driver {}, runtime {}\n\nbandwidth:\n", name, prop.major,
               prop.minor, prop.multiProcessorCount, driver, runtime);
  }

  const double memcpy_gbps = bench_memcpy(report);
  bench_add(report, ts::kFloat32, memcpy_gbps);
  bench_add(report, ts::kBFloat16, memcpy_gbps);
  ts::cuda::empty_cache();

  if (!report.csv) fmt::print("\nGEMM (row-major, no transposes, float32 accumulation):\n");
  cublasLtHandle_t lt;
  cublasHandle_t handle;
  BENCH_CUBLAS(cublasLtCreate(&lt));
  BENCH_CUBLAS(cublasCreate(&handle));
  // Full float32 in cuBLAS as in Tessera (TF32 is off unless set_matmul_allow_tf32(true)).
  BENCH_CUBLAS(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  {
    ts::Tensor workspace = cuda_empty({static_cast<int64_t>(kLtWorkspaceBytes)}, ts::kUInt8);
    for (ts::DType dtype : {ts::kBFloat16, ts::kFloat32}) {
      for (int64_t n : {int64_t{4096}, int64_t{8192}}) {
        bench_gemm(report, lt, handle, workspace.raw_data(), dtype, n);
      }
    }
    BENCH_CUDA(cudaStreamSynchronize(current_stream()));
  }
  BENCH_CUBLAS(cublasDestroy(handle));
  BENCH_CUBLAS(cublasLtDestroy(lt));
}

}  // namespace

int main(int argc, char** argv) {
  Report report;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--csv") == 0) {
      report.csv = true;
    } else {
      fmt::print(stderr, "usage: {} [--csv]\n", argv[0]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    fmt::print("no CUDA device: cuda_bench needs a GPU\n");
    return 0;
  }
  try {
    run(report);
  } catch (const std::exception& e) {
    fmt::print(stderr, "cuda_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
