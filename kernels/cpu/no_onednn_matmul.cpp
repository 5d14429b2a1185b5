// The oneDNN seam in a build without oneDNN (see kernels/cpu/onednn_matmul.h): every problem is
// declined, so kernels/cpu/linalg.cpp computes float32 with another backend and bfloat16/float16
// in float32.

#include "tessera/kernels/cpu/onednn_matmul.h"

namespace tessera::cpu {

bool onednn_available() { return false; }

bool onednn_matmul(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { return false; }

}  // namespace tessera::cpu
