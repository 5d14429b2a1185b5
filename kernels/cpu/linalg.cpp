// CPU matmul: float32, bfloat16 and float16 through oneDNN's matmul primitive (float16 and
// bfloat16 computed in float32 where this CPU has no oneDNN kernel for them), float64 and
// integers through Eigen's products.

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn_matmul.h"
#include "runtime/parallel.h"

namespace tessera::cpu {

namespace {

// Multiply-adds worth a thread: starting a parallel region costs microseconds, about what a
// thread needs for this much work, so smaller products run on fewer threads.
constexpr int64_t kWorkPerThread = int64_t{1} << 18;

// oneDNN (an OpenMP build) and Eigen size their parallel regions by the calling thread's
// omp_get_max_threads(); this sets it for one call and restores the caller's value.
class OmpThreadsGuard {
 public:
  explicit OmpThreadsGuard(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
  }
  ~OmpThreadsGuard() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  OmpThreadsGuard(const OmpThreadsGuard&) = delete;
  OmpThreadsGuard& operator=(const OmpThreadsGuard&) = delete;

 private:
  int saved_;
};

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

// float32, bfloat16, float16 (operands in BLAS layout).
void floating_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (onednn_matmul(out, a, b)) return;
  if (out.dtype() == kFloat32) {
    eigen_matmul<float>(out, a, b);
    return;
  }
  // oneDNN has no optimized kernel for this reduced-precision dtype here: compute in float32.
  Tensor out32 = Tensor::make_empty(out.sizes(), kFloat32, out.device());
  floating_matmul(out32, compact_copy(a, kFloat32), compact_copy(b, kFloat32));
  kernels(DeviceType::CPU, "matmul").copy(out, out32);
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
  const int64_t work = out.numel() * a.size(-1);
  OmpThreadsGuard threads(
      static_cast<int>(std::clamp<int64_t>(work / kWorkPerThread, 1, get_num_threads())));
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

}  // namespace

void register_linalg_kernels(KernelTable& table) { table.matmul = matmul_kernel; }

}  // namespace tessera::cpu
