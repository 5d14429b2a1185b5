#pragma once
// Tessera's own float32 GEMM for narrow outputs, N <= 16 columns (a classifier head, a LoRA
// rank, a tensor-parallel shard of a small dim), one of the backends the measured choice of
// kernels/cpu/linalg.cpp picks from (See Note [Narrow float32 products] in narrow_matmul.cpp).

#include <cstdint>

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// The most output columns the narrow kernels take.
inline constexpr int64_t kNarrowGemmMaxN = 16;

// Whether this build and CPU run the narrow kernels (x86-64 with AVX-512F).
bool narrow_matmul_available();

// out = a @ b, float32, shapes and layouts as onednn_matmul (operands in BLAS layout, see
// blas_layout; K > 0, out non-empty and contiguous). Uses the calling thread's OpenMP thread
// count, splitting the rows. Returns false, computing nothing, when N > kNarrowGemmMaxN or the
// kernels are not available.
bool narrow_matmul(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tessera::cpu
