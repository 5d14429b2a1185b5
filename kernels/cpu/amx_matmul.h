#pragma once
// Tessera's bfloat16 GEMM on Intel AMX tiles, taken before oneDNN for bfloat16 products where the
// CPU has AMX (See Note [AMX bfloat16 products] in amx_matmul.cpp).

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// Whether this build, CPU and OS run the AMX kernels: x86-64 with AMX-TILE, AMX-BF16 and
// AVX512-BF16, and a Linux kernel that grants this process the tile data state.
bool amx_bf16_matmul_available();

// Whether a batch of m x k @ k x n bfloat16 products on `threads` OpenMP threads goes to the AMX
// kernels rather than oneDNN: where they measured faster (Note [AMX bfloat16 products]).
bool amx_bf16_preferred(int64_t m, int64_t n, int64_t k, int64_t batch, int threads);

// out = a @ b, bfloat16 (float32 accumulation, rounded once to bfloat16 as oneDNN does), shapes
// and layouts as onednn_matmul (operands in BLAS layout, see blas_layout; K > 0, out non-empty and
// contiguous), any size. Uses the calling thread's OpenMP thread count, splitting the rows.
// Returns false, computing nothing, when the kernels are not available or the dtype is not
// bfloat16.
bool amx_bf16_matmul(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tessera::cpu
