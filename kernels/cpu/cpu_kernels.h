#pragma once
// Registration of the CPU kernel families (one function per family, called from
// kernels/register.cpp), so adding a family touches its own file and that one list.

#include "runtime/dispatch.h"

namespace tessera::cpu {

void register_copy_kernels(KernelTable& table);
void register_elementwise_kernels(KernelTable& table);
void register_elementwise_backward_kernels(KernelTable& table);
void register_reduction_kernels(KernelTable& table);
void register_linalg_kernels(KernelTable& table);
void register_nn_kernels(KernelTable& table);
void register_random_kernels(KernelTable& table);

}  // namespace tessera::cpu
