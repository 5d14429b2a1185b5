#pragma once
// Storage: a reference-counted block of memory on one device, shared by a tensor and its views.
// CPU memory comes from the CPU caching allocator (allocator.h), CUDA memory from the CUDA one
// (See Note [CUDA caching allocator] in runtime/cuda/cuda_allocator.h); memory Tessera does not
// own (from_blob, from_dlpack: runtime/interop.h) is given back through its owner's deleter.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "tessera/runtime/allocator.h"
#include "tessera/runtime/cuda/cuda_allocator.h"
#include "tessera/runtime/device.h"

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

  // Memory that Tessera did not allocate (from_blob, from_dlpack): `deleter(data)` runs once, when
  // the last view dies; an empty deleter leaves the memory to its owner for good. No check of
  // `device` (the caller checks it) nor of the memory. A read-only storage refuses every write
  // (detail::check_writable in runtime/tensor.h). The deleter must not throw: it runs in a
  // destructor, and an exception escaping it terminates the program.
  static std::shared_ptr<Storage> external(void* data, size_t nbytes, Device device,
                                           std::function<void(void*)> deleter,
                                           bool read_only = false);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Whether writes are refused: external memory imported from DLPack with the read-only flag.
  bool read_only() const { return read_only_; }
  // Whether the memory belongs to someone else (Storage::external).
  bool is_external() const { return kind_ == Kind::kExternal; }

  // Gives the memory back while the Storage (and every view of it) lives on without data, and
  // takes new memory of the same size (uninitialized) again: fully_shard frees the unsharded
  // parameters that forward saved for backward, and refills them before backward (PyTorch
  // resizes the storage to 0 and back). Reading a released storage is a caller bug; neither call
  // changes the version counter (a refill restores what was saved). External memory cannot be
  // released (Error): its owner decides when it goes.
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
        kind_(Kind::kCuda),
        cuda_block_(block) {}

 private:
  // Lets only Storage::external call the public (for std::make_shared) constructor below.
  struct ExternalKey {
    explicit ExternalKey() = default;
  };

 public:
  Storage(ExternalKey, void* data, size_t nbytes, Device device, std::function<void(void*)> deleter,
          bool read_only);

 private:
  struct ExternalMemory {
    std::function<void(void*)> deleter;
  };
  enum class Kind : uint8_t { kCpu, kCuda, kExternal };
  void give_back_memory() noexcept;

  void* data_;
  size_t nbytes_;
  Device device_;
  Kind kind_ = Kind::kCpu;
  // What to give back, tagged by kind_: the CPU path stays one branch, with no extra allocation
  // or virtual call; external memory pays one allocation for its deleter, owned here.
  union {
    CpuBlock cpu_block_;
    cuda::CudaBlock cuda_block_;
    ExternalMemory* external_;
  };
  std::atomic<uint64_t> version_{0};
  bool released_ = false;
  bool read_only_ = false;
};

}  // namespace tessera
