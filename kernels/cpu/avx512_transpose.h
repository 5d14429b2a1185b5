#pragma once
// A 16 x 16 transpose of 32-bit lanes in AVX-512 registers, shared by the GEMMs' packs: the
// register-tile kernels' column-major b (tile_matmul.cpp), the AMX kernels' column-major operands
// (amx_matmul.cpp, on pairs of bfloat16 values as one lane).

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

namespace tessera::cpu {

// In-register transpose of 16 vectors (rows) into 16 vectors (columns).
__attribute__((target("avx512f"))) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + q], 128-bit lane L: column 4L + q of rows 4i .. 4i + 3.
  __m512 u[16];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d t0 = _mm512_castps_pd(t[4 * i]), t1 = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * i + 2]), t3 = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xDD);
    r[q] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[8 + q] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[4 + q] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

}  // namespace tessera::cpu

#endif
