#pragma once
// Internal: one heap block holding two std::allocate_shared objects (See Note [One allocation per
// new tensor] in runtime/tensor.cpp).

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>

namespace tessera::detail {

// A heap block of kBytes that hands out consecutive pieces and frees itself once every piece is
// given back, and the builder's own reference released (the pieces may die on different threads:
// a TensorImpl with its last Tensor, its Storage with the last view).
template <size_t kBytes>
class SharedPairBlock {
 public:
  // The builder holds one reference until release_builder(); a piece that does not fit comes
  // from the global heap instead (still correct, one more allocation).
  static SharedPairBlock* create() { return new SharedPairBlock; }
  void release_builder() { release(); }

  // align: at most alignof(std::max_align_t) (the heap's own), as the fallback assumes.
  void* take(size_t bytes, size_t align) {
    const size_t start = (used_ + align - 1) / align * align;
    if (start + bytes > kBytes) return ::operator new(bytes);
    used_ = start + bytes;
    live_.fetch_add(1, std::memory_order_relaxed);
    return bytes_ + start;
  }
  void give_back(void* p) {
    auto* c = static_cast<unsigned char*>(p);
    if (c < bytes_ || c >= bytes_ + kBytes) {
      ::operator delete(p);
      return;
    }
    release();
  }

 private:
  SharedPairBlock() = default;
  void release() {
    if (live_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  std::atomic<int> live_{1};  // pieces handed out and not given back, plus the builder
  size_t used_ = 0;           // only the builder's thread takes pieces
  alignas(std::max_align_t) unsigned char bytes_[kBytes];
};

// The allocator std::allocate_shared places its control block and object with.
template <typename T, size_t kBytes>
struct SharedPairAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = SharedPairAllocator<U, kBytes>;
  };

  explicit SharedPairAllocator(SharedPairBlock<kBytes>* b) : block(b) {}
  template <typename U>
  SharedPairAllocator(const SharedPairAllocator<U, kBytes>& other)
      : block(other.block) {}  // NOLINT

  static_assert(alignof(T) <= alignof(std::max_align_t),
                "SharedPairBlock hands out heap alignment");
  T* allocate(size_t n) { return static_cast<T*>(block->take(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t) { block->give_back(p); }

  template <typename U>
  bool operator==(const SharedPairAllocator<U, kBytes>& other) const {
    return block == other.block;
  }

  SharedPairBlock<kBytes>* block;
};

}  // namespace tessera::detail
