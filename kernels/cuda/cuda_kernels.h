#pragma once
// Registration of the CUDA kernel families (one function per family, called from
// kernels/cuda/register.cu), mirroring kernels/cpu/cpu_kernels.h.

#include "tessera/runtime/dispatch.h"

namespace tessera::cuda {

void register_copy_kernels(KernelTable& table);  // copy.cu: copy, fill, arange
void register_elementwise_kernels(
    KernelTable& table);  // elementwise.cu: unary, binary, where, clamp
void register_elementwise_backward_kernels(
    KernelTable& table);                           // elementwise_backward.cu: pointwise_grad
void register_random_kernels(KernelTable& table);  // random.cu: uniform, normal, randint, dropout
void register_reduction_kernels(KernelTable& table);  // reduction.cu: reduce
void register_nn_kernels(
    KernelTable& table);  // softmax.cu, norm.cu, nn.cu: softmax, norms, embedding, nll
void register_linalg_kernels(KernelTable& table);  // matmul.cu: matmul through cuBLASLt

}  // namespace tessera::cuda
