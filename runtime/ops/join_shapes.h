#pragma once
// The shape rules of cat and stack on shapes alone, so that the single-device ops and dtensor/'s
// rules (on global shapes, identical on every rank, before any rank computes) check the same
// thing with the same messages.

#include <cstdint>
#include <vector>

#include "tessera/runtime/shape.h"

namespace tessera::detail {

// torch.cat still accepts 1-D tensors of shape [0] next to tensors of any rank and skips them (a
// legacy rule kept for compatibility).
inline bool skipped_by_cat(const Shape& s) { return s.size() == 1 && s[0] == 0; }

// The output shape of cat(shapes, dim); {0} when every input is skipped. Errors: no inputs, a
// 0-dim input, inputs of different ranks, sizes that differ outside `dim`, `dim` out of range.
Shape cat_shape(const std::vector<Shape>& shapes, int64_t dim);

// The output shape of stack(shapes, dim). Errors: no inputs, shapes that differ, `dim` out of
// range.
Shape stack_shape(const std::vector<Shape>& shapes, int64_t dim);

}  // namespace tessera::detail
