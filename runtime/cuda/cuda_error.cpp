// The one seam where CUDA runtime errors become tessera errors (runtime/cuda/cuda_check.h).

#include <cuda_runtime_api.h>

#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/error.h"

namespace tessera::cuda::detail {

void throw_cuda_error(cudaError_t error, const char* op, const char* expr) {
  std::string message =
      ::tessera::detail::concat_message("[", op, "] ", expr, " failed: ", cudaGetErrorString(error),
                                        " (", cudaGetErrorName(error), ")");
  // The runtime also keeps the error as the thread's last error; clear it so that the next
  // TS_CUDA_CHECK_LAUNCH does not report it a second time against an unrelated op. (Sticky errors,
  // which corrupt the context, stay and keep failing every later call.)
  cudaGetLastError();
  if (error == cudaErrorMemoryAllocation) throw OutOfMemoryError(message);
  throw DeviceError(message);
}

}  // namespace tessera::cuda::detail
