#pragma once
// The CPU matmul's seam to oneDNN (kernels/cpu/linalg.cpp): onednn_matmul.cpp runs oneDNN's
// matmul primitive; a build without oneDNN (TESSERA_ONEDNN=OFF, or AUTO without the package)
// compiles no_onednn_matmul.cpp instead, whose onednn_matmul declines every problem so that
// linalg.cpp takes another path. This header needs no oneDNN headers; its layout helpers
// (MatrixLayout, batch_offsets) serve every CPU matmul backend.

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// How the last two dims of t lie in memory, when oneDNN and BLAS-style kernels can read them in
// place: one unit stride, the other (the leading dimension) at least the matrix's extent along it.
// Size-1 dims may have any stride. nullopt for other layouts (a slice with a step, an expand).
struct MatrixLayout {
  bool row_major;  // unit stride along the columns
  int64_t ld;      // stride between rows (row-major) or columns (column-major)
};

// The strides of a rows x cols matrix whose size-1 dims may have any stride (they never move a
// pointer), normalized to the layout oneDNN and BLAS expect: row-major (cs == 1, rs >= cols) or
// column-major (rs == 1, cs >= rows) when the matrix has one of them.
inline std::array<int64_t, 2> normalized_strides(int64_t rows, int64_t cols, int64_t rs,
                                                 int64_t cs) {
  if (rows == 1 && cols == 1) return {1, 1};
  if (rows == 1) return {cs == 1 ? cols : 1, cs};
  if (cols == 1) return {rs, rs == 1 ? rows : 1};
  return {rs, cs};
}

// t's MatrixLayout (inline: both sides of the seam and linalg.cpp's Eigen path use it).
inline std::optional<MatrixLayout> blas_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const auto [rs, cs] = normalized_strides(rows, cols, t.stride(-2), t.stride(-1));
  if (cs == 1 && rs >= cols) return MatrixLayout{true, rs};
  if (rs == 1 && cs >= rows) return MatrixLayout{false, cs};
  return std::nullopt;
}

// Element offsets of each batch's matrix in t, batches in row-major order of t's batch dims (for
// the BLAS-style paths, which multiply one matrix at a time).
inline std::vector<int64_t> batch_offsets(const Tensor& t, int64_t batch) {
  const int64_t nb = t.dim() - 2;
  std::vector<int64_t> offsets(static_cast<size_t>(batch));
  std::vector<int64_t> idx(static_cast<size_t>(nb), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < batch; ++i) {
    offsets[static_cast<size_t>(i)] = off;
    for (int64_t d = nb - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.size(d)) {
        off += t.stride(d);
        break;
      }
      off -= (t.size(d) - 1) * t.stride(d);
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return offsets;
}

// Whether this build has oneDNN (TESSERA_ONEDNN).
bool onednn_available();

// out = a @ b with oneDNN, for float32, bfloat16 and float16 (all three of one dtype).
// Shapes as KernelTable::matmul: a [batch..., M, K], b [batch..., K, N], out [batch..., M, N]
// contiguous, batch dims already broadcast (stride 0). Requires K > 0 and out non-empty, each
// matrix of a and b with a unit stride in one of its two dims, and no batch dim broadcast in both
// a and b. Uses the calling thread's OpenMP thread count.
// Returns false, computing nothing, when oneDNN has no optimized implementation for this dtype
// and layout on this CPU (its reference implementation is far slower than converting), and
// always in a build without oneDNN. A defined `bias` (1-D, contiguous, out's dtype, out's last
// dim) is added to every row of out in the product's own pass (oneDNN's bias argument).
bool onednn_matmul(const Tensor& out, const Tensor& a, const Tensor& b,
                   const Tensor& bias = Tensor());

}  // namespace tessera::cpu
