// Current device and DeviceGuard (runtime/cuda.h), and the device-index checks.

#include <cuda_runtime_api.h>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/cuda/device_index.h"
#include "tessera/runtime/error.h"

namespace tessera::cuda {
namespace detail {

int device_count() {
  static const int count = cuda_device_count();
  return count;
}

void check_device_index(int index, const char* op) {
  const int count = device_count();
  TS_CHECK_T(DeviceError, index >= 0 && index < count, "[", op, "] device index ", index,
             " is out of range: this machine has ", count, " CUDA devices");
}

int resolve_device_index(int index, const char* op) {
  if (index == -1) return current_device();
  check_device_index(index, op);
  return index;
}

}  // namespace detail

int current_device() {
  int index = 0;
  TS_CUDA_CHECK("cuda.current_device", cudaGetDevice(&index));
  return index;
}

void set_device(int index) {
  detail::check_device_index(index, "cuda.set_device");
  if (current_device() != index) TS_CUDA_CHECK("cuda.set_device", cudaSetDevice(index));
}

// A CPU device leaves the current CUDA device alone, so code handling a CPU and a CUDA tensor
// (copies) can guard either side's device unconditionally.
DeviceGuard::DeviceGuard(Device device) {
  if (!device.is_cuda()) return;
  detail::check_device_index(device.index(), "cuda.DeviceGuard");
  const int previous = current_device();
  if (previous != device.index()) {
    TS_CUDA_CHECK("cuda.DeviceGuard", cudaSetDevice(device.index()));
  }
  previous_ = previous;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ < 0) return;
  // Compared again: code inside the guard may have changed the device itself.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) {
    static_cast<void>(cudaSetDevice(previous_));
  }
}

void synchronize(int device_index) {
  const int index = detail::resolve_device_index(device_index, "cuda.synchronize");
  DeviceGuard guard(Device::cuda(index));
  TS_CUDA_CHECK("cuda.synchronize", cudaDeviceSynchronize());
}

}  // namespace tessera::cuda
