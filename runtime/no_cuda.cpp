// Built when TESSERA_CUDA is OFF or no toolkit was found: no CUDA devices.

#include "runtime/device.h"

namespace tessera {

int cuda_device_count() { return 0; }

}  // namespace tessera
