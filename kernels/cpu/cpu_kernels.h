#pragma once
// Registration of the CPU kernel families (one function per family, called from
// kernels/register.cpp), so adding a family touches its own file and that one list.

#include "tessera/runtime/cpu_isa.h"
#include "tessera/runtime/dispatch.h"

// The variant a file of the ISA families is being compiled as: CMake defines it for the AVX2 and
// AVX-512 copies (kernels/CMakeLists.txt); the baseline build leaves it at kBaseline.
#ifndef TS_CPU_ISA
#define TS_CPU_ISA kBaseline
#endif

namespace tessera::cpu {

void register_copy_kernels(KernelTable& table);
void register_linalg_kernels(KernelTable& table);
void register_nn_kernels(KernelTable& table);
void register_random_kernels(KernelTable& table);

// The families compiled once per CPU ISA variant (Note [CPU ISA variants] in kernels/cpu_isa.cpp).
// Each variant's copy of a file defines the specialization for its own variant, so the entry
// points of the variants have different names; kernels/cpu_isa.cpp calls them.
template <CpuIsa isa>
void register_elementwise_kernels(KernelTable& table);
template <CpuIsa isa>
void register_elementwise_backward_kernels(KernelTable& table);
template <CpuIsa isa>
void register_reduction_kernels(KernelTable& table);
template <CpuIsa isa>
void register_softmax_kernels(KernelTable& table);
template <CpuIsa isa>
void register_norm_kernels(KernelTable& table);

// The variant this translation unit is compiled as.
inline constexpr CpuIsa kThisCpuIsa = CpuIsa::TS_CPU_ISA;

}  // namespace tessera::cpu

namespace tessera::detail {
// Defined in kernels/cpu_isa.cpp: installs the ISA families of the variant that
// set_cpu_isa / TESSERA_CPU_ISA chose (the best one this CPU supports by default).
void install_cpu_isa_kernels(KernelTable& table);
}  // namespace tessera::detail
