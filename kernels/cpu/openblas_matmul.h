#pragma once
// The CPU float32 matmul's seam to OpenBLAS (kernels/cpu/linalg.cpp): openblas_matmul.cpp calls
// cblas_sgemm; a build without OpenBLAS (TESSERA_OPENBLAS=OFF, or AUTO without the package)
// compiles no_openblas_matmul.cpp instead, which declines every problem. This header needs no
// OpenBLAS headers.

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// Whether this build has OpenBLAS (TESSERA_OPENBLAS).
bool openblas_available();

// out = a @ b with OpenBLAS's sgemm, float32. Shapes and layouts as onednn_matmul (operands in
// BLAS layout, see blas_layout; K > 0, out non-empty and contiguous). Uses the calling thread's
// OpenMP thread count: the batches, or the rows or columns of one product, are split over that
// many OpenMP threads, each calling OpenBLAS on one thread (See Note [CPU float32 GEMM choice]).
// Returns false, computing nothing, for dims beyond OpenBLAS's 32-bit integers, and always in a
// build without OpenBLAS.
bool openblas_matmul(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tessera::cpu
