#include "tessera/checkpoint/detail/boxes.h"

#include <algorithm>
#include <cstring>

#include "tessera/dtensor/dtensor.h"

namespace tessera::checkpoint::detail {

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<LocalBlock> local_blocks(const Tensor& t) {
  if (!t.is_distributed()) {
    return {LocalBlock{Box{Shape(t.shape().size(), 0), t.shape()}, Shape(t.shape().size(), 0)}};
  }
  const DTensor d(t);
  const auto runs = d.spec().global_runs(d.spec().coordinate());
  // Per dim, the runs the local tensor holds in order (its local index is their concatenation).
  std::vector<LocalBlock> blocks{LocalBlock{}};
  for (size_t dim = 0; dim < runs.size(); ++dim) {
    std::vector<dtensor::Run> dim_runs = runs[dim];
    // No runs: the rank's shard is empty along this dim.
    if (dim_runs.empty()) dim_runs.push_back(dtensor::Run{d.shape()[dim], 0});
    std::vector<LocalBlock> next;
    for (const LocalBlock& block : blocks) {
      int64_t local_offset = 0;
      for (const dtensor::Run& run : dim_runs) {
        LocalBlock b = block;
        b.global.offsets.push_back(run.offset);
        b.global.sizes.push_back(run.size);
        b.local_offsets.push_back(local_offset);
        local_offset += run.size;
        next.push_back(std::move(b));
      }
    }
    blocks = std::move(next);
  }
  return blocks;
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  Box out;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    out.offsets.push_back(lo);
    out.sizes.push_back(hi - lo);
  }
  return out;
}

namespace {

// The row-major linear index of `index` in an array of `sizes`.
int64_t linear_index(const Shape& sizes, const Shape& index) {
  int64_t linear = 0;
  for (size_t d = 0; d < sizes.size(); ++d) linear = linear * sizes[d] + index[d];
  return linear;
}

// The row-major strides (in elements) of an array of `sizes`.
Shape row_major_strides(const Shape& sizes) {
  Shape strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return strides;
}

}  // namespace

std::pair<int64_t, int64_t> byte_span(const ArrayRegion& array, const Shape& region,
                                      size_t element_size) {
  Shape last = array.start;
  for (size_t d = 0; d < region.size(); ++d) {
    if (region[d] == 0) return {0, 0};
    last[d] += region[d] - 1;
  }
  const auto bytes = static_cast<int64_t>(element_size);
  return {linear_index(array.sizes, array.start) * bytes,
          (linear_index(array.sizes, last) + 1) * bytes};
}

void copy_region(const std::byte* src_data, int64_t src_base, const ArrayRegion& src,
                 std::byte* dst_data, const ArrayRegion& dst, const Shape& region,
                 size_t element_size) {
  const size_t ndim = region.size();
  for (int64_t s : region) {
    if (s == 0) return;
  }
  const auto bytes = static_cast<int64_t>(element_size);
  if (ndim == 0) {
    std::memcpy(dst_data, src_data - src_base, element_size);
    return;
  }
  // The trailing dims both arrays hold whole merge into one contiguous run with the last
  // partial one: a Shard(0) block is one memcpy, a Shard(1) block one per row.
  size_t inner = ndim - 1;
  int64_t run = region[inner];
  while (inner > 0 && region[inner] == src.sizes[inner] && region[inner] == dst.sizes[inner]) {
    --inner;
    run *= region[inner];
  }
  const Shape src_strides = row_major_strides(src.sizes);
  const Shape dst_strides = row_major_strides(dst.sizes);
  // An odometer over the dims before `inner`.
  Shape index(inner, 0);
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < inner; ++d) {
      s += (src.start[d] + index[d]) * src_strides[d];
      t += (dst.start[d] + index[d]) * dst_strides[d];
    }
    s += src.start[inner] * src_strides[inner];
    t += dst.start[inner] * dst_strides[inner];
    std::memcpy(dst_data + t * bytes, src_data + s * bytes - src_base,
                static_cast<size_t>(run * bytes));
    size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < region[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace tessera::checkpoint::detail
