#pragma once
// TS_HOST_DEVICE marks functions compiled for both the host and CUDA devices: scalar math written
// once (Philox, elementwise functors) and shared by the CPU and CUDA kernels.

#if defined(__CUDACC__)
#define TS_HOST_DEVICE __host__ __device__
#else
#define TS_HOST_DEVICE
#endif
