// Built without the CUDA toolkit: no CUDA kernels (tensors on CUDA devices raise DeviceError).

#include "tessera/kernels/cuda_seam.h"

namespace tessera::cuda {

bool install_cuda_kernels(KernelTable&) { return false; }

}  // namespace tessera::cuda
