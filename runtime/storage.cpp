#include "runtime/storage.h"

namespace tessera {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  return allocate(nbytes, device, std::allocator<Storage>());
}

Storage::~Storage() {
  if (released_) return;
  if (device_.is_cpu()) {
    cpu_free(cpu_block_);
  } else {
    cuda::cuda_free(cuda_block_);
  }
}

void Storage::release_memory() {
  if (released_) return;
  if (device_.is_cpu()) {
    cpu_free(cpu_block_);
  } else {
    cuda::cuda_free(cuda_block_);
  }
  data_ = nullptr;
  released_ = true;
}

void Storage::reacquire_memory() {
  if (!released_) return;
  if (device_.is_cpu()) {
    cpu_block_ = cpu_alloc(nbytes_);
    data_ = cpu_block_.ptr;
  } else {
    cuda_block_ = cuda::cuda_alloc(nbytes_, device_.index());
    data_ = cuda_block_.ptr;
  }
  released_ = false;
}

}  // namespace tessera
