#pragma once
// The mask of an AVX-512 kernel's partial vector, shared by the register-tile and narrow GEMMs
// (tile_matmul.cpp, narrow_matmul.cpp) and the GELU kernels (gelu_avx512.h).

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#include <cstdint>

namespace tessera::cpu {

// Lanes [0, count) of a 16-float vector: none when count <= 0, all from 16 on.
inline __mmask16 first_lanes(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF)
                     : static_cast<__mmask16>((1u << static_cast<unsigned>(count)) - 1u);
}

}  // namespace tessera::cpu

#endif
