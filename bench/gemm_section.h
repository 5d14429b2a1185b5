#pragma once

namespace tessera::bench {
// Prints GEMM float32 and bfloat16 at 1024/2048/4096: tessera::matmul GFLOP/s beside oneDNN's
// matmul primitive executed directly in the same run.
void run_gemm_section();
}  // namespace tessera::bench
