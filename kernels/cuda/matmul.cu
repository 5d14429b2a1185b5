// CUDA matmul: floating dtypes through cuBLASLt (one strided-batched GEMM per call), integers
// through a tiled shared-memory kernel with exact wrap-around arithmetic (also the fallback for
// floating layouts cuBLASLt has no algorithm for).
//
// Note [Row-major GEMM through cuBLASLt]
// cuBLASLt multiplies column-major matrices. A row-major out [M, N] is, read column-major, the
// matrix out^T [N, M], and out^T = b^T a^T: so cuBLASLt computes with A' = b's data, B' = a's data,
// m' = N, n' = M. A row-major operand read column-major is already its transpose (op N); a
// column-major one (a transposed view) needs op T. Each operand keeps its own leading dim, so
// transposed and sliced views are multiplied in place; anything else is copied contiguous first.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "tessera/kernels/cuda/cublas_check.h"
#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/launch.cuh"
#include "tessera/runtime/cuda.h"

namespace tessera::cuda {

namespace {

constexpr const char* kOp = "matmul";
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// Plans are a few hundred bytes of host memory plus cuBLASLt descriptors: a thread that sees
// more distinct GEMM shapes than this simply starts over.
constexpr size_t kMaxCachedPlans = 512;
constexpr int kTile = 16;
constexpr unsigned kMaxGridDim = 65535;

// One GEMM operand as cuBLASLt reads it: its matrix order and leading dim, and the element
// stride between consecutive batches (0 for a broadcast operand).
struct Operand {
  Tensor t;
  bool row_major = true;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// The single stride stepping through t's batch dims in row-major order, if one exists.
std::optional<int64_t> uniform_batch_stride(const Tensor& t) {
  std::optional<int64_t> stride;
  int64_t inner = 1;  // batches spanned by the dims already visited
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (!stride) {
      stride = t.stride(d);
    } else if (t.stride(d) != *stride * inner) {
      return std::nullopt;
    }
    inner *= t.size(d);
  }
  return stride.value_or(0);
}

// Row- or column-major with a valid leading dim (>= the contiguous extent, as BLAS requires).
std::optional<std::pair<bool, int64_t>> matrix_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t sr = t.stride(-2), sc = t.stride(-1);
  if (sc == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : sr;
    if (ld >= std::max<int64_t>(cols, 1)) return std::make_pair(true, ld);
  }
  if (sr == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : sc;
    if (ld >= std::max<int64_t>(rows, 1)) return std::make_pair(false, ld);
  }
  return std::nullopt;
}

// The operand in place when cuBLASLt can read it (see Note [Row-major GEMM through cuBLASLt]),
// else a contiguous copy on the current stream. `force_copy`: contiguous in any case.
Operand blas_operand(const Tensor& t, bool force_copy) {
  Operand op;
  op.t = force_copy ? t.contiguous() : t;
  auto layout = matrix_layout(op.t);
  auto stride = uniform_batch_stride(op.t);
  if (!layout || !stride) {
    op.t = t.contiguous();
    layout = matrix_layout(op.t);
    stride = uniform_batch_stride(op.t);
  }
  TS_INTERNAL_ASSERT(layout && stride, "[matmul] a contiguous operand has no BLAS layout");
  op.row_major = layout->first;
  op.ld = layout->second;
  op.batch_stride = *stride;
  return op;
}

// The largest power of two (up to cuBLASLt's default 256) dividing the operand's address and
// every step from it, so the heuristic picks only algorithms this alignment satisfies.
uint32_t alignment_bytes(const void* ptr, int64_t ld, int64_t batch_stride, size_t es) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | static_cast<uint64_t>(ld) * es |
                        static_cast<uint64_t>(batch_stride) * es | 256;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

GemmTypes gemm_types(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return {CUDA_R_32F, matmul_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
              CUDA_R_32F};
    case kBFloat16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case kFloat16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case kFloat64:
      return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    default:
      TS_INTERNAL_ASSERT(false, "[matmul] no cuBLASLt types for ", dtype);
  }
  return {};
}

// Everything a plan depends on, in cuBLASLt's terms (see Note [Row-major GEMM through cuBLASLt]:
// A' is b's data, B' is a's, C' is out's).
struct GemmKey {
  int device;
  DType dtype;
  cublasComputeType_t compute;
  bool trans_a, trans_b;
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  int64_t batch, stride_a, stride_b, stride_c;
  uint32_t align_a, align_b, align_c;

  auto operator<=>(const GemmKey&) const = default;
};

// The descriptors and chosen algorithm of one GEMM geometry.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Destroying descriptors only frees host memory; errors here are not actionable.
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

// Per thread: a cuBLASLt handle per device, a workspace per (device, stream) so that GEMMs on
// different streams never share one, and the plan cache.
struct ThreadContext {
  std::map<int, cublasLtHandle_t> handles;
  std::map<std::pair<int, cudaStream_t>, Tensor> workspaces;
  std::map<GemmKey, std::unique_ptr<Plan>> plans;

  ThreadContext() = default;
  ThreadContext(const ThreadContext&) = delete;
  ThreadContext& operator=(const ThreadContext&) = delete;
  ~ThreadContext() {
    plans.clear();
    for (auto& [device, handle] : handles) cublasLtDestroy(handle);
  }

  cublasLtHandle_t handle(int device) {
    auto it = handles.find(device);
    if (it != handles.end()) return it->second;
    cublasLtHandle_t h = nullptr;
    TS_CUBLAS_CHECK(kOp, cublasLtCreate(&h));
    handles.emplace(device, h);
    return h;
  }

  void* workspace(int device, cudaStream_t stream) {
    auto it = workspaces.find({device, stream});
    if (it == workspaces.end()) {
      Tensor ws =
          Tensor::make_empty({static_cast<int64_t>(kWorkspaceBytes)}, kUInt8, Device::cuda(device));
      it = workspaces.emplace(std::make_pair(device, stream), std::move(ws)).first;
    }
    return it->second.storage()->data();
  }
};

thread_local ThreadContext t_context;

// The device address of t's first element.
char* bytes_of(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) +
         t.storage_offset() * static_cast<int64_t>(element_size(t.dtype()));
}

void set_layout_batch(cublasLtMatrixLayout_t layout, int32_t batch, int64_t stride) {
  TS_CUBLAS_CHECK(kOp, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &batch, sizeof(batch)));
  TS_CUBLAS_CHECK(
      kOp, cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &stride, sizeof(stride)));
}

std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const GemmTypes& types, const GemmKey& k) {
  auto plan = std::make_unique<Plan>();
  TS_CUBLAS_CHECK(kOp, cublasLtMatmulDescCreate(&plan->desc, types.compute, types.scale));
  const cublasOperation_t op_a = k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TS_CUBLAS_CHECK(kOp, cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &op_a, sizeof(op_a)));
  TS_CUBLAS_CHECK(kOp, cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                      &op_b, sizeof(op_b)));
  // Stored (pre-op) shapes: op(A') is m x k, op(B') is k x n.
  TS_CUBLAS_CHECK(kOp, cublasLtMatrixLayoutCreate(&plan->a, types.data, k.trans_a ? k.k : k.m,
                                                  k.trans_a ? k.m : k.k, k.lda));
  TS_CUBLAS_CHECK(kOp, cublasLtMatrixLayoutCreate(&plan->b, types.data, k.trans_b ? k.n : k.k,
                                                  k.trans_b ? k.k : k.n, k.ldb));
  TS_CUBLAS_CHECK(kOp, cublasLtMatrixLayoutCreate(&plan->c, types.data, k.m, k.n, k.ldc));
  const auto batch = static_cast<int32_t>(k.batch);
  set_layout_batch(plan->a, batch, k.stride_a);
  set_layout_batch(plan->b, batch, k.stride_b);
  set_layout_batch(plan->c, batch, k.stride_c);

  cublasLtMatmulPreference_t pref = nullptr;
  TS_CUBLAS_CHECK(kOp, cublasLtMatmulPreferenceCreate(&pref));
  const auto release = [](cublasLtMatmulPreference_t p) { cublasLtMatmulPreferenceDestroy(p); };
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(release)>
      pref_guard(pref, release);
  const uint64_t workspace = kWorkspaceBytes;
  TS_CUBLAS_CHECK(
      kOp, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace, sizeof(workspace)));
  const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  const uint32_t aligns[4] = {k.align_a, k.align_b, k.align_c, k.align_c};  // D is C
  for (int i = 0; i < 4; ++i) {
    const uint32_t align = aligns[i];
    TS_CUBLAS_CHECK(
        kOp, cublasLtMatmulPreferenceSetAttribute(pref, align_attrs[i], &align, sizeof(align)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  // NOT_SUPPORTED: no algorithm for this configuration at all, like an empty result.
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) {
    TS_CUBLAS_CHECK(kOp, status);
  }
  plan->found =
      status == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (plan->found) plan->algo = result.algo;
  return plan;
}

// out = a @ b through cuBLASLt; false when cuBLASLt has no algorithm for these layouts.
bool gemm(const Tensor& out, const Operand& a, const Operand& b, int64_t batch) {
  const int64_t m = out.size(-2), n = out.size(-1), k = a.t.size(-1);
  const size_t es = element_size(out.dtype());
  const GemmTypes types = gemm_types(out.dtype());
  const int device = out.device().index();
  TS_CHECK_T(NotSupportedError, batch <= INT32_MAX, "[matmul] CUDA matmul supports at most ",
             INT32_MAX, " batches, got ", batch);
  const char* a_ptr = bytes_of(a.t);
  const char* b_ptr = bytes_of(b.t);
  char* c_ptr = bytes_of(out);
  // See Note [Row-major GEMM through cuBLASLt]: A' = b, B' = a, C' = out^T.
  const GemmKey key{.device = device,
                    .dtype = out.dtype(),
                    .compute = types.compute,
                    .trans_a = !b.row_major,
                    .trans_b = !a.row_major,
                    .m = n,
                    .n = m,
                    .k = k,
                    .lda = b.ld,
                    .ldb = a.ld,
                    .ldc = n,
                    .batch = batch,
                    .stride_a = b.batch_stride,
                    .stride_b = a.batch_stride,
                    .stride_c = m * n,
                    .align_a = alignment_bytes(b_ptr, b.ld, b.batch_stride, es),
                    .align_b = alignment_bytes(a_ptr, a.ld, a.batch_stride, es),
                    .align_c = alignment_bytes(c_ptr, n, m * n, es)};
  ThreadContext& ctx = t_context;
  const cublasLtHandle_t handle = ctx.handle(device);
  auto it = ctx.plans.find(key);
  if (it == ctx.plans.end()) {
    if (ctx.plans.size() >= kMaxCachedPlans) ctx.plans.clear();
    it = ctx.plans.emplace(key, make_plan(handle, types, key)).first;
  }
  const Plan& plan = *it->second;
  if (!plan.found) return false;
  const cudaStream_t stream = current_cuda_stream();
  void* workspace = ctx.workspace(device, stream);
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const bool dbl = types.scale == CUDA_R_64F;
  const void* alpha = dbl ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
  TS_CUBLAS_CHECK(
      kOp, cublasLtMatmul(handle, plan.desc, alpha, b_ptr, plan.a, a_ptr, plan.b, beta, c_ptr,
                          plan.c, c_ptr, plan.c, &plan.algo, workspace, kWorkspaceBytes, stream));
  return true;
}

// The accumulator of the tiled kernel: integers in the unsigned type of their width (exact, and
// overflow wraps as on the CPU), reduced floats in float (as cuBLASLt's CUBLAS_COMPUTE_32F).
template <typename T>
struct TiledAcc {
  using type = std::make_unsigned_t<T>;
};
template <>
struct TiledAcc<Half> {
  using type = float;
};
template <>
struct TiledAcc<BFloat16> {
  using type = float;
};
template <>
struct TiledAcc<float> {
  using type = float;
};
template <>
struct TiledAcc<double> {
  using type = double;
};

template <typename T, typename Acc>
__device__ __forceinline__ Acc to_acc(T v) {
  if constexpr (kIsReducedFloat<T>) {
    return to_float(v);
  } else {
    return static_cast<Acc>(v);
  }
}

template <typename T, typename Acc>
__device__ __forceinline__ T from_acc(Acc v) {
  if constexpr (kIsReducedFloat<T>) {
    return from_float<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// Tiled GEMM over any strides, one kTile x kTile output tile per block, grid-stride over tiles
// and batches: the integer matmul, and the fallback for floating layouts cuBLASLt refuses.
template <typename T>
__global__ void tiled_matmul_kernel(T* out, const T* a, const T* b, int64_t m, int64_t n, int64_t k,
                                    int64_t batch, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                                    int64_t b_bs, int64_t b_rs, int64_t b_cs) {
  using Acc = typename TiledAcc<T>::type;
  __shared__ Acc tile_a[kTile][kTile];
  __shared__ Acc tile_b[kTile][kTile + 1];  // padded: column reads hit distinct banks
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t m_tiles = (m + kTile - 1) / kTile, n_tiles = (n + kTile - 1) / kTile;
  for (int64_t z = blockIdx.z; z < batch; z += gridDim.z) {
    for (int64_t tm = blockIdx.y; tm < m_tiles; tm += gridDim.y) {
      for (int64_t tn = blockIdx.x; tn < n_tiles; tn += gridDim.x) {
        const int64_t row = tm * kTile + ty, col = tn * kTile + tx;
        Acc acc = 0;
        for (int64_t k0 = 0; k0 < k; k0 += kTile) {
          const int64_t ak = k0 + tx, bk = k0 + ty;
          tile_a[ty][tx] =
              row < m && ak < k ? to_acc<T, Acc>(a[z * a_bs + row * a_rs + ak * a_cs]) : Acc{0};
          tile_b[ty][tx] =
              bk < k && col < n ? to_acc<T, Acc>(b[z * b_bs + bk * b_rs + col * b_cs]) : Acc{0};
          __syncthreads();
          for (int i = 0; i < kTile; ++i) {
            acc = static_cast<Acc>(acc + tile_a[ty][i] * tile_b[i][tx]);
          }
          __syncthreads();
        }
        if (row < m && col < n) out[(z * m + row) * n + col] = from_acc<T, Acc>(acc);
      }
    }
  }
}

void tiled_matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in, int64_t batch) {
  const Tensor a = uniform_batch_stride(a_in) ? a_in : a_in.contiguous();
  const Tensor b = uniform_batch_stride(b_in) ? b_in : b_in.contiguous();
  const int64_t m = out.size(-2), n = out.size(-1), k = a.size(-1);
  const dim3 block(kTile, kTile);
  const auto cap = [](int64_t v) {
    return static_cast<unsigned>(std::min<int64_t>(v, kMaxGridDim));
  };
  const dim3 grid(cap((n + kTile - 1) / kTile), cap((m + kTile - 1) / kTile), cap(batch));
  const cudaStream_t stream = current_cuda_stream();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      TS_INTERNAL_ASSERT(false, "[matmul] CUDA kernel called with ", out.dtype());
    } else {
      tiled_matmul_kernel<T><<<grid, block, 0, stream>>>(
          device_ptr<T>(out), device_ptr<const T>(a), device_ptr<const T>(b), m, n, k, batch,
          *uniform_batch_stride(a), a.stride(-2), a.stride(-1), *uniform_batch_stride(b),
          b.stride(-2), b.stride(-1));
      TS_CUDA_CHECK_LAUNCH(kOp);
    }
  });
}

void matmul_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  TS_INTERNAL_ASSERT(a.dtype() == out.dtype() && b.dtype() == out.dtype(),
                     "[matmul] kernel called with dtypes ", a.dtype(), ", ", b.dtype(), " -> ",
                     out.dtype());
  if (out.numel() == 0) return;
  const DeviceGuard guard(out.device());
  if (a.size(-1) == 0) {  // every element is an empty sum
    TS_CUDA_CHECK(kOp, cudaMemsetAsync(bytes_of(out), 0, out.nbytes(), current_cuda_stream()));
    return;
  }
  const int64_t batch = out.numel() / (out.size(-2) * out.size(-1));
  if (!is_floating_point(out.dtype())) {
    tiled_matmul(out, a, b, batch);
    return;
  }
  if (gemm(out, blas_operand(a, false), blas_operand(b, false), batch)) return;
  // No algorithm for these leading dims or alignments: retry on contiguous operands, and should
  // cuBLASLt still refuse, the tiled kernel computes it (float accumulation, like cuBLASLt's).
  if (gemm(out, blas_operand(a, true), blas_operand(b, true), batch)) return;
  tiled_matmul(out, a, b, batch);
}

}  // namespace

void register_linalg_kernels(KernelTable& table) { table.matmul = matmul_kernel; }

}  // namespace tessera::cuda
