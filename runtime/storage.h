#pragma once
// Storage: a reference-counted block of memory on one device, shared by a tensor and its views.

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/allocator.h"
#include "runtime/device.h"

namespace tessera {

class Storage {
 public:
  // Allocates nbytes on device (contents uninitialized).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return block_.ptr; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Version counter shared by every view of this storage: bumped by each in-place write, read by
  // autograd to detect that a tensor saved for backward was modified.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

  explicit Storage(CpuBlock block, size_t nbytes, Device device)
      : block_(block), nbytes_(nbytes), device_(device) {}

 private:
  CpuBlock block_;
  size_t nbytes_;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tessera
