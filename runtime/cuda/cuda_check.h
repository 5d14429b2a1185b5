#pragma once
// Internal: the one seam where CUDA runtime errors become tessera errors. Included only by
// sources built with the CUDA toolkit (runtime/cuda/*.cpp, kernels/cuda/*.cu, collectives/nccl).
//
// TS_CUDA_CHECK("op", expr) raises DeviceError (OutOfMemoryError for cudaErrorMemoryAllocation)
// whose message names the op, the failing expression and CUDA's own message, e.g.
// "[matmul] cudaMemcpyAsync(...) failed: an illegal memory access was encountered
// (cudaErrorIllegalAddress)". TS_CUDA_CHECK_LAUNCH("op") checks the kernel launch just made.

#include <cuda_runtime_api.h>

namespace tessera::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* op, const char* expr);

}  // namespace tessera::cuda::detail

#define TS_CUDA_CHECK(op, expr)                                             \
  do {                                                                      \
    const cudaError_t ts_cuda_error_ = (expr);                              \
    if (ts_cuda_error_ != cudaSuccess) [[unlikely]] {                       \
      ::tessera::cuda::detail::throw_cuda_error(ts_cuda_error_, op, #expr); \
    }                                                                       \
  } while (0)

#define TS_CUDA_CHECK_LAUNCH(op) TS_CUDA_CHECK(op, cudaGetLastError())
