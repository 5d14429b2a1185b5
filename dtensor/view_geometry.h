#pragma once
// Note [Global geometry of views]
// A view of a DTensor has the global strides and storage offset the single-device view of the
// global tensor has: transpose(0, 2) of a [5, 6, 2] DTensor has strides [1, 2, 12] and is not
// contiguous, a slice of a Replicate DTensor starting at 1 has storage_offset() 1. The strides
// are part of the output spec (cached with the op's choice, whose key holds the input's strides);
// the offset lives in the DTensor's own TensorImpl, as on one device, and is the input's moved by
// the view. Both come from running the same view on a probe: a plain tensor with the input's
// global geometry over the input's local storage, whose data a view never reads. A reshape that
// the global strides cannot view copies on one device, so its result is contiguous, offset 0.

#include <cstdint>
#include <optional>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

struct ViewGeometry {
  Shape stride;
  // How far the view moves the storage offset; nullopt: a fresh tensor (offset 0).
  std::optional<int64_t> offset_delta;
};

// The geometry of view `op` (view, reshape, transpose, permute, select, slice, unsqueeze,
// expand) of the DTensor `input` into global shape `out_shape`; `local` is the op's local lambda.
ViewGeometry global_view_geometry(const char* op, const Tensor& input, const Shape& out_shape,
                                  const LocalOp& local, const LocalLayout& layout);

}  // namespace tessera::dtensor
