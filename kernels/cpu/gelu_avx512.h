#pragma once
// Float32 GELU (erf form) and its derivative in AVX-512, for the AVX-512 variant of the
// elementwise kernels (kernels/cpu/elementwise.cpp, elementwise_backward.cpp).
//
// Note [GELU from tables]
// Eigen's float erf is a rational function: about fourteen vector operations and a divide. The
// forward ran at ~1.1 cycles per element on one EPYC (Zen 4) thread and the backward, which adds
// an exp for the density, at ~2.3; a transformer block's step spent ~0.45 ms in them, more than
// in any other op but its products. Here both functions of |x| are piecewise quartics on 32
// intervals of width 1/4 (kernels/cpu/gelu_tables.h, written by tools/gen_gelu_tables.py): the
// interval's coefficients come out of two registers by one vpermt2ps each, so a vector costs five
// permutes and about ten FMAs, with no divide and no exp. Measured on that thread, 512 Ki
// elements: forward 0.31 -> 0.22 ns per element, backward 0.61 -> 0.27.
// - Odd parts: gelu(x) = x/2 + |x| h(|x|) and gelu'(x) = 1/2 + sign(x) k(|x|), with h = Phi - 1/2
//   and k = Phi + a phi - 1/2, so only |x| is looked up. The largest absolute error of h is
//   2e-8 and of k 1.1e-7 (Eigen's erf form: ~2e-7), checked against float64 by runtime_tests
//   "[isa]".
// - The interval: s = 4 |x| + 1.5 * 2^23 rounds 4 |x| to the nearest integer i in s's low
//   mantissa bits, which index the permutes as they are; |x| is clamped below 7.875 so that
//   i <= 31. Beyond 5.875 the tables hold h = k = 1/2 exactly, so the results saturate as the
//   erf form's do: gelu(x) = x or 0, gelu' = 1 or 0.
// - Special values as the erf form: NaN stays NaN (the clamp keeps a NaN), gelu(+inf) = inf,
//   gelu(-inf) = NaN (-inf/2 + inf/2); gelu'(+-inf) = NaN (the erf form's inf * exp(-inf)), by
//   adding x * 0.

#if defined(__AVX512F__)

#include <immintrin.h>

#include <cstdint>

#include "tessera/kernels/cpu/avx512_lanes.h"
#include "tessera/kernels/cpu/gelu_tables.h"

namespace tessera::cpu {

namespace gelu_detail {

constexpr int kDegree = gelu_tables::kDegree;

struct Table {
  __m512 low[kDegree + 1], high[kDegree + 1];
};

inline Table load_table(const float (&c)[kDegree + 1][32]) {
  Table t;
  for (int d = 0; d <= kDegree; ++d) {
    t.low[d] = _mm512_load_ps(c[d]);
    t.high[d] = _mm512_load_ps(c[d] + 16);
  }
  return t;
}

// The table's polynomial at a = |x| (clamped below 7.875).
inline __m512 lookup(const Table& t, __m512 x) {
  const __m512 a = _mm512_min_ps(_mm512_set1_ps(7.87f), _mm512_abs_ps(x));
  const __m512 magic = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23
  const __m512 s = _mm512_fmadd_ps(a, _mm512_set1_ps(4.0f), magic);
  const __m512i index = _mm512_castps_si512(s);
  const __m512 offset = _mm512_fnmadd_ps(_mm512_sub_ps(s, magic), _mm512_set1_ps(0.25f), a);
  __m512 p = _mm512_permutex2var_ps(t.low[kDegree], index, t.high[kDegree]);
  for (int d = kDegree - 1; d >= 0; --d) {
    p = _mm512_fmadd_ps(p, offset, _mm512_permutex2var_ps(t.low[d], index, t.high[d]));
  }
  return p;
}

inline __m512 gelu16(const Table& t, __m512 x) {
  return _mm512_fmadd_ps(_mm512_abs_ps(x), lookup(t, x), _mm512_mul_ps(x, _mm512_set1_ps(0.5f)));
}

inline __m512 gelu_backward16(const Table& t, __m512 g, __m512 x) {
  const __m512 k = lookup(t, x);
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  __m512 derivative =
      _mm512_add_ps(_mm512_set1_ps(0.5f), _mm512_mask_sub_ps(k, negative, _mm512_setzero_ps(), k));
  derivative = _mm512_fmadd_ps(x, _mm512_setzero_ps(), derivative);  // +-inf, NaN: NaN
  return _mm512_mul_ps(g, derivative);
}

}  // namespace gelu_detail

// out[0, n) = gelu(in[0, n)); out may equal in.
inline void gelu_avx512(float* out, const float* in, int64_t n) {
  using namespace gelu_detail;
  const Table t = load_table(gelu_tables::kHalfErf);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, gelu16(t, _mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 lanes = first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, lanes, gelu16(t, _mm512_maskz_loadu_ps(lanes, in + i)));
  }
}

// out[0, n) = g * gelu'(x) over [0, n); out may equal g or x.
inline void gelu_backward_avx512(float* out, const float* g, const float* x, int64_t n) {
  using namespace gelu_detail;
  const Table t = load_table(gelu_tables::kHalfDerivative);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, gelu_backward16(t, _mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 lanes = first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, lanes,
                          gelu_backward16(t, _mm512_maskz_loadu_ps(lanes, g + i),
                                          _mm512_maskz_loadu_ps(lanes, x + i)));
  }
}

}  // namespace tessera::cpu

#endif  // __AVX512F__
