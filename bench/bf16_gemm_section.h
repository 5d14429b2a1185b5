#pragma once

namespace tessera::bench {
// Prints the bfloat16 GEMM backends side by side at 1 and 2 threads: oneDNN's matmul and the AMX
// kernels (kernels/cpu/amx_matmul.h) called directly on the same operands, alternating, and which
// of the two tessera::matmul takes (amx_bf16_preferred). A line says why when the CPU has no AMX.
void run_bf16_gemm_section();
}  // namespace tessera::bench
