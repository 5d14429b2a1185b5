#pragma once
// Tessera's own float32 GEMM on register tiles of 14 x 32 outputs, one of the backends the
// measured choice of kernels/cpu/linalg.cpp picks from (See Note [Register-tile float32
// products] in tile_matmul.cpp).

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// Whether this build and CPU run the tile kernels (x86-64 with AVX-512F).
bool tile_matmul_available();

// out = a @ b (+ bias), float32, shapes and layouts as onednn_matmul (operands in BLAS layout,
// see blas_layout; K > 0, out non-empty and contiguous). A defined `bias` (1-D, contiguous,
// float32, out's last dim) is added to every row of out as the tiles are stored. Uses the calling
// thread's OpenMP thread count, splitting a batch by products and one product by columns (at least
// 256 per thread) or else by rows. Returns false, computing nothing, when the
// kernels are not available.
bool tile_matmul(const Tensor& out, const Tensor& a, const Tensor& b,
                 const Tensor& bias = Tensor());

// Columns of b the tile kernels take per block on this CPU (sized to its L2; tests cross it).
int64_t tile_matmul_column_block();

}  // namespace tessera::cpu
