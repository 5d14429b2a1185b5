#pragma once
// Internal: the calling thread's current stream as a cudaStream_t, for kernels and copies (see
// Note [Current stream] in runtime/cuda.h). Built only with the CUDA toolkit.

#include <cuda_runtime_api.h>

#include "tessera/runtime/cuda.h"

namespace tessera::cuda {

inline cudaStream_t current_cuda_stream(int device_index = -1) {
  return static_cast<cudaStream_t>(current_stream(device_index).handle());
}

}  // namespace tessera::cuda
