// The CUDA half of kernels/register.cpp (see kernels/cuda_seam.h).

#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda_seam.h"

namespace tessera::cuda {

bool install_cuda_kernels(KernelTable& table) {
  register_copy_kernels(table);
  register_elementwise_kernels(table);
  register_elementwise_backward_kernels(table);
  register_random_kernels(table);
  register_reduction_kernels(table);
  register_nn_kernels(table);
  register_linalg_kernels(table);
  return true;
}

}  // namespace tessera::cuda
