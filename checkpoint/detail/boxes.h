#pragma once
// Boxes of a global tensor (offsets and sizes per dim) and copies between row-major arrays that
// hold them: the geometry of saving a rank's blocks and of reading the overlaps of saved chunks.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/runtime/shape.h"
#include "tessera/runtime/tensor.h"

namespace tessera::checkpoint::detail {

struct Box {
  Shape offsets;
  Shape sizes;
  int64_t numel() const;
};

// A block of the calling rank's local tensor: where it sits in the global tensor, and where in
// the local tensor (its offsets there; the sizes are the box's).
struct LocalBlock {
  Box global;
  Shape local_offsets;
};

// The blocks `t` holds on this rank: a plain tensor one, the whole; a DTensor its chunks (one per
// combination of its runs per dim: a StridedShard dim has several; an empty shard one empty block).
std::vector<LocalBlock> local_blocks(const Tensor& t);

// The box both hold; nullopt when they do not meet (or one is empty).
std::optional<Box> intersect(const Box& a, const Box& b);

// A row-major array of `sizes` and the sub-box of it at `start` with `region` sizes.
struct ArrayRegion {
  const Shape& sizes;
  Shape start;
};

// The bytes [first, end) of the array that hold the region (row-major: from its first element
// to its last); {0, 0} for an empty region.
std::pair<int64_t, int64_t> byte_span(const ArrayRegion& array, const Shape& region,
                                      size_t element_size);

// Copies the region from `src` (an array of src.sizes, of which `src_data` holds the bytes from
// `src_base` on) into `dst_data` (the whole array of dst.sizes).
void copy_region(const std::byte* src_data, int64_t src_base, const ArrayRegion& src,
                 std::byte* dst_data, const ArrayRegion& dst, const Shape& region,
                 size_t element_size);

}  // namespace tessera::checkpoint::detail
