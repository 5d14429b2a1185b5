#pragma once
// Internal (CUDA builds): device-index checks shared by runtime/cuda/*.cpp.

namespace tessera::cuda::detail {

// The number of CUDA devices, asked once: it cannot change during the process.
int device_count();
// Raises DeviceError "[op] device index I is out of range: this machine has N CUDA devices" unless
// 0 <= index < device_count().
void check_device_index(int index, const char* op);
// `index` checked as above, or the calling thread's current device for -1.
int resolve_device_index(int index, const char* op);

}  // namespace tessera::cuda::detail
