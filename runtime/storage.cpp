#include "tessera/runtime/storage.h"

#include <utility>

#include "tessera/runtime/error.h"

namespace tessera {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  return allocate(nbytes, device, std::allocator<Storage>());
}

std::shared_ptr<Storage> Storage::external(void* data, size_t nbytes, Device device,
                                           std::function<void(void*)> deleter, bool read_only) {
  return std::make_shared<Storage>(ExternalKey(), data, nbytes, device, std::move(deleter),
                                   read_only);
}

// If an allocation here throws, no Storage exists and the deleter is not run: the memory stays
// its owner's (from_blob and from_dlpack promise that on every error).
Storage::Storage(ExternalKey, void* data, size_t nbytes, Device device,
                 std::function<void(void*)> deleter, bool read_only)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      kind_(Kind::kExternal),
      external_(new ExternalMemory{std::move(deleter)}),
      read_only_(read_only) {}

Storage::~Storage() {
  if (!released_) give_back_memory();
}

void Storage::give_back_memory() noexcept {
  if (kind_ == Kind::kCpu) {
    cpu_free(cpu_block_);
  } else if (kind_ == Kind::kCuda) {
    cuda::cuda_free(cuda_block_);
  } else {
    if (external_->deleter) external_->deleter(data_);
    delete external_;
  }
}

void Storage::release_memory() {
  if (released_) return;
  TS_CHECK(kind_ != Kind::kExternal, "[release_memory] the storage (", nbytes_, " bytes on ",
           device_, ") views memory Tessera does not own (from_blob or from_dlpack), which only ",
           "its owner can free; release a tensor Tessera allocated instead");
  give_back_memory();
  data_ = nullptr;
  released_ = true;
}

void Storage::reacquire_memory() {
  if (!released_) return;
  if (kind_ == Kind::kCpu) {
    cpu_block_ = cpu_alloc(nbytes_);
    data_ = cpu_block_.ptr;
  } else {
    cuda_block_ = cuda::cuda_alloc(nbytes_, device_.index());
    data_ = cuda_block_.ptr;
  }
  released_ = false;
}

}  // namespace tessera
