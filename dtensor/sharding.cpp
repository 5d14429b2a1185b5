#include "tessera/dtensor/sharding.h"

#include <algorithm>

#include "tessera/runtime/error.h"

namespace tessera::dtensor {

namespace {

// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b for b near INT64_MAX.
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

Run chunk_of(int64_t length, int64_t parts, int64_t index) {
  const int64_t chunk = parts == 0 ? 0 : ceil_div(length, parts);
  // chunk * index <= length + chunk - 1 only for the ranks that hold something: clamp first, and
  // never form start + chunk (it overflows for lengths near INT64_MAX).
  const int64_t start =
      index >= ceil_div(length, std::max<int64_t>(chunk, 1)) ? length : chunk * index;
  return Run{start, std::min(chunk, length - start)};
}

std::vector<Run> shard_positions(int64_t length, int64_t parts, int64_t index,
                                 int64_t split_factor) {
  // Only the first ceil(length / ceil(length / split_factor)) pieces are non-empty (torch.chunk
  // makes no more), so a split factor far above the length costs no more than the length: at
  // most one run per element, never one per piece.
  const int64_t piece_length = ceil_div(length, split_factor);
  const int64_t pieces = piece_length == 0 ? 1 : ceil_div(length, piece_length);
  std::vector<Run> out;
  for (int64_t p = 0; p < pieces; ++p) {
    const Run piece = chunk_of(length, split_factor, p);
    const Run mine = chunk_of(piece.size, parts, index);
    out.push_back(Run{piece.offset + mine.offset, mine.size});
  }
  return out;
}

int64_t total_size(const std::vector<Run>& runs) {
  int64_t n = 0;
  for (const Run& r : runs) n += r.size;
  return n;
}

namespace {

// The global runs behind positions [begin, begin + size) of the sequence `runs` describes.
std::vector<Run> select_positions(const std::vector<Run>& runs, int64_t begin, int64_t size) {
  std::vector<Run> out;
  int64_t pos = 0;
  for (const Run& r : runs) {
    const int64_t lo = std::max(begin, pos);
    const int64_t hi = std::min(begin + size, pos + r.size);
    if (lo < hi) out.push_back(Run{r.offset + (lo - pos), hi - lo});
    pos += r.size;
  }
  return out;
}

}  // namespace

std::vector<std::vector<Run>> global_runs(const Shape& global_shape, const Shape& mesh_shape,
                                          const Placements& placements,
                                          const std::vector<int64_t>& coordinate) {
  TS_INTERNAL_ASSERT(
      placements.size() == mesh_shape.size() && coordinate.size() == mesh_shape.size(),
      "global_runs: placements, mesh and coordinate disagree");
  std::vector<std::vector<Run>> runs(global_shape.size());
  for (size_t d = 0; d < global_shape.size(); ++d) runs[d] = {Run{0, global_shape[d]}};
  for (size_t m = 0; m < placements.size(); ++m) {
    const Placement& p = placements[m];
    if (!p.is_shard()) continue;
    std::vector<Run>& dim_runs = runs[static_cast<size_t>(p.dim())];
    const int64_t length = total_size(dim_runs);
    std::vector<Run> next;
    for (const Run& pos : shard_positions(length, mesh_shape[m], coordinate[m], p.split_factor())) {
      for (const Run& g : select_positions(dim_runs, pos.offset, pos.size)) next.push_back(g);
    }
    dim_runs = std::move(next);
  }
  return runs;
}

Shape local_shape(const Shape& global_shape, const Shape& mesh_shape, const Placements& placements,
                  const std::vector<int64_t>& coordinate) {
  const std::vector<std::vector<Run>> runs =
      global_runs(global_shape, mesh_shape, placements, coordinate);
  Shape out;
  for (const auto& r : runs) out.push_back(total_size(r));
  return out;
}

}  // namespace tessera::dtensor
