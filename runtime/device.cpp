#include "runtime/device.h"

namespace tessera {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index_);
}

// This build has no CUDA path yet (TESSERA_CUDA adds runtime/cuda/ with the real answers).
bool cuda_is_available() { return false; }
int cuda_device_count() { return 0; }

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

}  // namespace tessera
