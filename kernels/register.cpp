// The one place that installs kernels into the runtime's tables (see runtime/dispatch.h).

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cuda_seam.h"

namespace tessera::detail {

bool install_kernels(DeviceType device, KernelTable& table) {
  if (device == DeviceType::CUDA) return cuda::install_cuda_kernels(table);
  cpu::register_copy_kernels(table);
  cpu::register_linalg_kernels(table);
  cpu::register_random_kernels(table);
  cpu::register_nn_kernels(table);
  // elementwise (and backward), reduction, softmax, norms: see Note [CPU ISA variants].
  install_cpu_isa_kernels(table);
  return true;
}

}  // namespace tessera::detail
