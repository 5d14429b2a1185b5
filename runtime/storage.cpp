#include "runtime/storage.h"

#include "runtime/error.h"

namespace tessera {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  if (!device.is_cpu()) {
    throw DeviceError(detail::concat_message("[empty] cannot allocate on ", device,
                                             ": this build of Tessera has no CUDA support"));
  }
  return std::make_shared<Storage>(cpu_alloc(nbytes), nbytes, device);
}

Storage::~Storage() {
  if (device_.is_cpu()) cpu_free(block_);
}

}  // namespace tessera
