#pragma once
// How the CPU GEMM backends that multiply one matrix at a time (openblas_matmul.cpp,
// narrow_matmul.cpp, tile_matmul.cpp, amx_matmul.cpp) read a batch of products and spread it over
// the calling thread's OpenMP threads.

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/kernels/cpu/onednn_matmul.h"
#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// out = a @ b, elements of type T (float, or BFloat16's bits as uint16_t), operands in BLAS layout
// (see blas_layout), as a batch of single-matrix products: their dims, the operands' layouts, and
// each product's matrices.
template <typename T>
class MatrixProducts {
 public:
  MatrixProducts(const Tensor& out, const Tensor& a, const Tensor& b)
      : m(out.size(-2)),
        n(out.size(-1)),
        k(a.size(-1)),
        batch(out.numel() / (m * n)),
        la(*blas_layout(a)),
        lb(*blas_layout(b)),
        a_(static_cast<const T*>(a.raw_data())),
        b_(static_cast<const T*>(b.raw_data())),
        out_(static_cast<T*>(out.raw_data())),
        offsets_a_(batch_offsets(a, batch)),
        offsets_b_(batch_offsets(b, batch)) {}

  // Product i's matrices (i < batch); its output is row-major and contiguous (ldc = n).
  const T* a_matrix(int64_t i) const { return a_ + offsets_a_[static_cast<size_t>(i)]; }
  const T* b_matrix(int64_t i) const { return b_ + offsets_b_[static_cast<size_t>(i)]; }
  T* out_matrix(int64_t i) const { return out_ + i * m * n; }

  const int64_t m, n, k, batch;
  const MatrixLayout la, lb;

 private:
  const T* a_;
  const T* b_;
  T* out_;
  std::vector<int64_t> offsets_a_, offsets_b_;
};

using Float32Products = MatrixProducts<float>;

// Bytes of L2 cache of one core (sysconf), 1 MiB where the system does not say: the GEMM kernels
// size the block of b every row block sweeps to half of it.
inline int64_t core_l2_bytes() {
  static const int64_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? int64_t{l2} : int64_t{1} << 20;
  }();
  return bytes;
}

// The length of for_each_gemm_piece's pieces along `extent` (the longest one a thread gets).
inline int64_t gemm_piece_length(int64_t batch, int64_t extent, int64_t align) {
  const int threads = omp_get_max_threads();
  if (batch >= threads) return extent;
  const int64_t block = std::max(align, (extent + threads - 1) / threads);
  return (block + align - 1) / align * align;
}

// Calls piece(i, begin, len) over the `batch` products, in parallel on the calling thread's
// OpenMP threads. With at least as many products as threads each piece is a whole product
// (begin 0, len extent); otherwise each product's `extent` (the output dim the backend splits)
// is cut into one block per thread, block lengths a multiple of `align` so that no thread ends
// on a ragged edge of the backend's micro-kernel it need not have.
template <typename Piece>
void for_each_gemm_piece(int64_t batch, int64_t extent, int64_t align, const Piece& piece) {
  const int threads = omp_get_max_threads();
  const int64_t block = gemm_piece_length(batch, extent, align);
  const int64_t parts = (extent + block - 1) / block;
  const int64_t tasks = batch * parts;
  const auto run = [&](int64_t task) {
    const int64_t begin = task % parts * block;
    piece(task / parts, begin, std::min(block, extent - begin));
  };
  if (threads == 1 || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) run(t);
  } else {
#pragma omp parallel for num_threads(static_cast <int>(std::min <int64_t>(threads, tasks))) \
    schedule(static)
    for (int64_t t = 0; t < tasks; ++t) run(t);
  }
}

}  // namespace tessera::cpu
