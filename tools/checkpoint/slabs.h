#pragma once
// The slabs consolidate writes a full tensor in: boxes that are contiguous in the tensor's
// row-major layout, in file order, each at most a byte budget, so that memory stays bounded
// however large the tensor (a single row beyond the budget is split along the next dims).

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tessera/checkpoint/detail/boxes.h"

namespace tessera::checkpoint_tool {

// Calls `fn` with each slab of a tensor of `shape` in row-major order; together they tile the
// tensor. Each holds at most max(slab_bytes, element_size) bytes. A 0-d tensor is one slab; an
// empty tensor none.
void for_each_slab(const Shape& shape, size_t element_size, int64_t slab_bytes,
                   const std::function<void(const checkpoint::detail::Box&)>& fn);

}  // namespace tessera::checkpoint_tool
