// The OpenBLAS seam in a build without OpenBLAS (see kernels/cpu/openblas_matmul.h): every
// problem is declined, so kernels/cpu/linalg.cpp chooses among the other backends.

#include "tessera/kernels/cpu/openblas_matmul.h"

namespace tessera::cpu {

bool openblas_available() { return false; }

bool openblas_matmul(const Tensor&, const Tensor&, const Tensor&) { return false; }

}  // namespace tessera::cpu
