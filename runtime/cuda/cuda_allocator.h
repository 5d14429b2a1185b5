#pragma once
// Internal: the CUDA caching allocator behind Storage::allocate for CUDA devices. The header needs
// no CUDA toolkit (storage.h names its block type); it is implemented by
// runtime/cuda/cuda_allocator.cpp in CUDA builds and by runtime/no_cuda.cpp otherwise (which
// raises DeviceError). Its statistics are read through runtime/cuda.h (memory_stats, ...).
//
// Note [CUDA caching allocator]
// cudaMalloc is slow and cudaFree synchronizes the device, so a freed block is kept in a cache and
// handed to the next allocation of the same size class instead of going back to the driver.
// - One cudaMalloc per block, never split. Requests are rounded up to a size class: a multiple of
//   512 B below 1 MiB, a multiple of 2 MiB from 1 MiB up. Training loops request the same shapes
//   every step, so near-exact classes hit the cache while wasting little: under 512 B per small
//   block, at most 2 MiB per large one, and the driver backs large allocations with 2 MiB pages
//   anyway. Power-of-two classes would hit more often across varying shapes but could waste up to
//   half of a large tensor on the device, where memory is the scarce resource.
// - A block is allocated on the calling thread's current stream of its device and, once freed,
//   reused only by allocations on that same stream: work on one stream runs in order, so the next
//   user's kernels cannot start before the previous user's kernels are done, with no event
//   needed. A tensor also used on another stream must be synchronized by its user before it is
//   freed (there is no record_stream).
// - When cudaMalloc runs out of memory, the device is synchronized, every cached block of that
//   device is cudaFree'd and the cudaMalloc retried once; then OutOfMemoryError names the request,
//   the device, and the bytes in use and cached.
// - One mutex per device (ranks may be threads sharing a device); statistics count block
//   capacity. The per-device state is never destroyed, so a Storage freed during static
//   destruction still finds it.

#include <cstddef>

namespace tessera::cuda {

// One block of device memory; returned to the allocator by cuda_free.
struct CudaBlock {
  void* ptr = nullptr;     // device pointer; null for a zero-byte allocation
  size_t capacity = 0;     // bytes reserved (size-class rounded)
  void* stream = nullptr;  // cudaStream_t it was allocated on: the free list it returns to
  int device = 0;
};

// Allocates nbytes (uninitialized) on CUDA device `device`, on the calling thread's current stream
// of that device; zero bytes call no cudaMalloc. Raises DeviceError when the device is not on this
// machine (or the build has no CUDA), OutOfMemoryError when the device is full even after the
// cache was emptied.
CudaBlock cuda_alloc(size_t nbytes, int device);
// Returns the block to its (device, stream) free list. Never throws.
void cuda_free(const CudaBlock& block) noexcept;

}  // namespace tessera::cuda
