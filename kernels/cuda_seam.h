#pragma once
// The CUDA kernels' entry into kernels/register.cpp: defined by kernels/cuda/register.cu in a
// CUDA build and by kernels/no_cuda_kernels.cpp otherwise (see cmake/TesseraCuda.cmake).

#include "tessera/runtime/dispatch.h"

namespace tessera::cuda {

// Fills `table` with the CUDA kernels; false when this build has none.
bool install_cuda_kernels(KernelTable& table);

}  // namespace tessera::cuda
