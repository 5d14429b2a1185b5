#include "tools/checkpoint/coverage.h"

#include <algorithm>
#include <vector>

#include "tessera/checkpoint/detail/boxes.h"
#include "tessera/checkpoint/detail/chunk_reader.h"

namespace tessera::checkpoint_tool {

namespace cd = checkpoint::detail;

void check_coverage(const std::string& op, const std::string& dir, const std::string& key,
                    const cd::TensorRecord& tensor) {
  const std::vector<cd::ChunkRecord>& chunks = tensor.chunks;
  // Sorted by their first offset, a chunk can only overlap the chunks after it that start before
  // it ends along dim 0: a sweep, not every pair (a StridedShard save has many chunks).
  std::vector<size_t> order(chunks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const bool scalar = tensor.shape.empty();
  if (!scalar) {
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return chunks[a].offsets[0] < chunks[b].offsets[0]; });
  }
  int64_t covered = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const cd::ChunkRecord& a = chunks[order[i]];
    const cd::Box box_a{a.offsets, a.sizes};
    covered += box_a.numel();
    for (size_t j = i + 1; j < order.size(); ++j) {
      const cd::ChunkRecord& b = chunks[order[j]];
      if (!scalar && b.offsets[0] >= a.offsets[0] + a.sizes[0]) break;
      if (!cd::intersect(box_a, cd::Box{b.offsets, b.sizes})) continue;
      throw checkpoint::CheckpointError(tessera::detail::concat_message(
          "[", op, "] ", dir, ": tensor \"", key,
          "\" has overlapping chunks: ", cd::describe_box(a.offsets, a.sizes), " in ", a.file,
          " and ", cd::describe_box(b.offsets, b.sizes), " in ", b.file,
          "; the metadata is corrupted or not written by a Tessera save"));
    }
  }
  if (covered != tensor.shape.numel()) {
    throw checkpoint::CheckpointError(tessera::detail::concat_message(
        "[", op, "] ", dir, ": the ", chunks.size(), " chunks of tensor \"", key, "\" ",
        tensor.shape, " hold ", covered, " of its ", tensor.shape.numel(),
        " elements; the metadata is corrupted or not written by a Tessera save"));
  }
}

}  // namespace tessera::checkpoint_tool
