// The process-wide TF32 switch for float32 matmuls (runtime/cuda.h).

#include <atomic>

#include "tessera/runtime/cuda.h"

namespace tessera::cuda {
namespace {

std::atomic<bool> g_matmul_allow_tf32{false};

}  // namespace

void set_matmul_allow_tf32(bool allow) {
  g_matmul_allow_tf32.store(allow, std::memory_order_relaxed);
}

bool matmul_allow_tf32() { return g_matmul_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace tessera::cuda
