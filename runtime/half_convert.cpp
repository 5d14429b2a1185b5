#include "tessera/runtime/half_convert.h"

#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera::detail {

namespace {

#if defined(__x86_64__)
bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}

__attribute__((target("avx,f16c"))) void halves_to_floats_f16c(const Half* in, float* out,
                                                               int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  if (i < count) {
    // The tail through a padded copy, so that every element converts the same way.
    Half h[8] = {};
    float f[8];
    std::memcpy(h, in + i, static_cast<size_t>(count - i) * sizeof(Half));
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    std::memcpy(out + i, f, static_cast<size_t>(count - i) * sizeof(float));
  }
}

__attribute__((target("avx,f16c"))) void floats_to_halves_f16c(const float* in, Half* out,
                                                               int64_t count) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), kRound);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  if (i < count) {
    float f[8] = {};
    Half h[8];
    std::memcpy(f, in + i, static_cast<size_t>(count - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(_mm256_loadu_ps(f), kRound));
    std::memcpy(out + i, h, static_cast<size_t>(count - i) * sizeof(Half));
  }
}
#endif

}  // namespace

void halves_to_floats(const Half* in, float* out, int64_t count) {
#if defined(__x86_64__)
  if (has_f16c()) return halves_to_floats_f16c(in, out, count);
#endif
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i]);
}

void floats_to_halves(const float* in, Half* out, int64_t count) {
#if defined(__x86_64__)
  if (has_f16c()) return floats_to_halves_f16c(in, out, count);
#endif
  for (int64_t i = 0; i < count; ++i) out[i] = Half(in[i]);
}

void bfloat16s_to_floats(const BFloat16* in, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i].bits) << 16);
  }
}

void floats_to_bfloat16s(const float* in, BFloat16* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(in[i]);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (x >> 16) | 0x40u;
    out[i].bits = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

}  // namespace tessera::detail
