#include "tessera/runtime/device.h"

namespace tessera {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index_);
}

bool cuda_is_available() { return cuda_device_count() > 0; }

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

}  // namespace tessera
