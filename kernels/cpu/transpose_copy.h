#pragma once
// Same-dtype copies between operands contiguous along different axes (see Note [Tiled transposed
// copies] in transpose_copy.cpp).

#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

// Copies src into dst (equal shapes and dtypes, not overlapping) in cache-sized tiles when dst is
// contiguous along one axis and src along another: t().contiguous(), a permute that moves the
// innermost dim, or the transposed inner block of a permute such as permute(0, 2, 1, 3), with any
// batch dims around them. Returns false, having written nothing, for any other layout.
bool transpose_copy(const Tensor& dst, const Tensor& src);

}  // namespace tessera::cpu
