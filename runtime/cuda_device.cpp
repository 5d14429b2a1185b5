// Built with the CUDA toolkit: asks the CUDA runtime how many devices there are.

#include <cuda_runtime_api.h>

#include "tessera/runtime/device.h"

namespace tessera {

int cuda_device_count() {
  int n = 0;
  // Without a driver, cudaGetDeviceCount returns an error (e.g. "CUDA driver version is
  // insufficient") rather than zero devices: that means "no device", never a failure.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later CUDA calls start clean
    return 0;
  }
  return n;
}

}  // namespace tessera
