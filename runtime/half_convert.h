#pragma once
// Bulk float16 / bfloat16 <-> float conversion for kernels that compute such data in float. Half
// and BFloat16 convert one element at a time with branches, which GCC does not vectorize: float16
// kernels ran up to 8x, bfloat16 ones 3x slower than float32 ones on half the bytes.
//
// float16: the F16C instructions where the CPU has them (checked once, at run time: the library is
// built for baseline x86-64), Half's own conversion otherwise; both round to nearest even and
// agree on every value, only the payload bits of NaNs may differ. bfloat16: BFloat16's own rules
// (round to nearest even, NaNs kept quiet) written without branches, bit for bit the same.

#include <cstdint>

#include "tessera/runtime/half.h"

namespace tessera::detail {

void halves_to_floats(const Half* in, float* out, int64_t count);
// `out` may alias `in` (same start): each group of elements is read before its results are
// written.
void floats_to_halves(const float* in, Half* out, int64_t count);

void bfloat16s_to_floats(const BFloat16* in, float* out, int64_t count);
// `out` may alias `in` (same start), as for floats_to_halves.
void floats_to_bfloat16s(const float* in, BFloat16* out, int64_t count);

}  // namespace tessera::detail
