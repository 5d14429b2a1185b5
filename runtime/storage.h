#pragma once
// Storage: a reference-counted block of memory on one device, shared by a tensor and its views.
// CPU memory comes from the CPU caching allocator (allocator.h), CUDA memory from the CUDA one
// (See Note [CUDA caching allocator] in runtime/cuda/cuda_allocator.h).

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/allocator.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/device.h"

namespace tessera {

class Storage {
 public:
  // Allocates nbytes on device (contents uninitialized). A CUDA device must exist on this machine
  // (DeviceError otherwise); CUDA memory is allocated on the thread's current stream.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // The same, with the Storage and its control block placed by `alloc` (std::allocate_shared).
  template <typename Alloc>
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device, const Alloc& alloc) {
    if (device.is_cpu()) return std::allocate_shared<Storage>(alloc, cpu_alloc(nbytes), nbytes);
    // cuda_alloc checks the device index (and, in a build without CUDA, raises DeviceError).
    return std::allocate_shared<Storage>(alloc, cuda::cuda_alloc(nbytes, device.index()), nbytes);
  }

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Gives the memory back while the Storage (and every view of it) lives on without data, and
  // takes new memory of the same size (uninitialized) again: fully_shard frees the unsharded
  // parameters that forward saved for backward, and refills them before backward (PyTorch
  // resizes the storage to 0 and back). Reading a released storage is a caller bug; neither call
  // changes the version counter (a refill restores what was saved).
  void release_memory();
  void reacquire_memory();
  bool holds_memory() const { return !released_; }

  // Version counter shared by every view of this storage: bumped by each in-place write, read by
  // autograd to detect that a tensor saved for backward was modified.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  explicit Storage(CpuBlock block, size_t nbytes)
      : data_(block.ptr), nbytes_(nbytes), device_(Device::cpu()), cpu_block_(block) {}
  explicit Storage(cuda::CudaBlock block, size_t nbytes)
      : data_(block.ptr),
        nbytes_(nbytes),
        device_(Device::cuda(block.device)),
        cuda_block_(block) {}

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  // The block to give back, tagged by device_.type(): the CPU path stays one branch, with no
  // extra allocation or virtual call.
  union {
    CpuBlock cpu_block_;
    cuda::CudaBlock cuda_block_;
  };
  std::atomic<uint64_t> version_{0};
  bool released_ = false;
};

}  // namespace tessera
