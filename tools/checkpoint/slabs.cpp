#include "tools/checkpoint/slabs.h"

#include <algorithm>

namespace tessera::checkpoint_tool {

void for_each_slab(const Shape& shape, size_t element_size, int64_t slab_bytes,
                   const std::function<void(const checkpoint::detail::Box&)>& fn) {
  const size_t ndim = shape.size();
  if (shape.numel() == 0) return;
  if (ndim == 0) {
    fn(checkpoint::detail::Box{});
    return;
  }
  // The split dim: the first whose trailing dims fit the budget. A slab is a run along it, with
  // every dim before it fixed to one index and every dim after it whole: contiguous in memory.
  size_t split = 0;
  int64_t inner = static_cast<int64_t>(element_size);  // bytes of one index along `split`
  for (size_t d = 1; d < ndim; ++d) inner *= shape[d];
  while (inner > slab_bytes && split + 1 < ndim) {
    ++split;
    inner /= shape[split];
  }
  const int64_t run = std::max<int64_t>(1, slab_bytes / inner);
  checkpoint::detail::Box box{Shape(ndim, 0), shape};
  for (size_t d = 0; d < split; ++d) box.sizes[d] = 1;
  while (true) {
    for (int64_t at = 0; at < shape[split]; at += run) {
      box.offsets[split] = at;
      box.sizes[split] = std::min(run, shape[split] - at);
      fn(box);
    }
    // The next index of the dims before the split, last dim fastest (an odometer).
    size_t d = split;
    while (d > 0 && ++box.offsets[d - 1] == shape[d - 1]) box.offsets[--d] = 0;
    if (d == 0) return;
  }
}

}  // namespace tessera::checkpoint_tool
