#pragma once
// Internal: the one seam where cuBLASLt errors become tessera errors (see runtime/cuda/cuda_check.h
// for the CUDA runtime's).
//
// TS_CUBLAS_CHECK("op", expr) raises DeviceError (OutOfMemoryError for CUBLAS_STATUS_ALLOC_FAILED)
// whose message names the op, the failing expression and cuBLAS's own message, e.g.
// "[matmul] cublasLtMatmul(...) failed: the requested functionality is not supported
// (CUBLAS_STATUS_NOT_SUPPORTED)".

#include <cublasLt.h>

#include <string>

#include "tessera/runtime/error.h"

namespace tessera::cuda::detail {

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* op,
                                            const char* expr) {
  const std::string message = ::tessera::detail::concat_message(
      "[", op, "] ", expr, " failed: ", cublasLtGetStatusString(status), " (",
      cublasLtGetStatusName(status), ")");
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(message);
  throw DeviceError(message);
}

}  // namespace tessera::cuda::detail

#define TS_CUBLAS_CHECK(op, expr)                                                \
  do {                                                                           \
    const cublasStatus_t ts_cublas_status_ = (expr);                             \
    if (ts_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]] {               \
      ::tessera::cuda::detail::throw_cublas_error(ts_cublas_status_, op, #expr); \
    }                                                                            \
  } while (0)
