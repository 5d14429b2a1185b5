#pragma once
// An independent reference for which global elements a rank holds, written from the torch
// documentation's definitions alone and sharing no code with dtensor/sharding.h, the planner or the
// executor (which work with runs of indices): here every dim is an explicit list of indices.
//
//   Shard(d) on a mesh dim of n ranks: the rank at coordinate c takes torch.chunk(indices, n)[c]
//     (chunks of ceil(L / n); past the last chunk a rank holds nothing).
//   StridedShard(d, sf): torch.chunk(indices, sf) into sf pieces, then rank c takes
//     torch.chunk(piece, n)[c] of every piece, in piece order (the docstring's right-to-left
//     sharding: [_StridedShard(0, 2), Shard(0)] on 2x2 over 8 rows gives (i, j) shard 2j + i).
// Mesh dims apply left to right, each to what the earlier ones left.

#include <algorithm>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::dtensor_test::independent {

using Indices = std::vector<int64_t>;

// torch.chunk(seq, parts)[index], or nothing past the last chunk.
inline Indices torch_chunk(const Indices& seq, int64_t parts, int64_t index) {
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t chunk = (length + parts - 1) / parts;
  const int64_t begin = std::min(length, chunk * index);
  const int64_t end = std::min(length, begin + chunk);
  return Indices(seq.begin() + begin, seq.begin() + end);
}

// Per tensor dim, the global indices the rank at `coordinate` holds, in local order.
inline std::vector<Indices> held_indices(const Shape& shape, const Shape& mesh_shape,
                                         const Placements& placements,
                                         const std::vector<int64_t>& coordinate) {
  std::vector<Indices> held(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    for (int64_t i = 0; i < shape[d]; ++i) held[d].push_back(i);
  }
  for (size_t m = 0; m < placements.size(); ++m) {
    const Placement& p = placements[m];
    if (p.kind() != PlacementKind::Shard && p.kind() != PlacementKind::StridedShard) continue;
    Indices& dim = held[static_cast<size_t>(p.dim())];
    const int64_t pieces = p.kind() == PlacementKind::StridedShard ? p.split_factor() : 1;
    Indices next;
    for (int64_t k = 0; k < pieces; ++k) {
      const Indices mine = torch_chunk(torch_chunk(dim, pieces, k), mesh_shape[m], coordinate[m]);
      next.insert(next.end(), mine.begin(), mine.end());
    }
    dim = std::move(next);
  }
  return held;
}

// The elements of `full` at the given indices of every dim, in that order (a new tensor).
inline Tensor take(const Tensor& full, const std::vector<Indices>& held) {
  Tensor out = full;
  for (size_t d = 0; d < held.size(); ++d) {
    std::vector<Tensor> rows;
    for (int64_t i : held[d]) rows.push_back(out.narrow(static_cast<int64_t>(d), i, 1));
    out = rows.empty() ? out.narrow(static_cast<int64_t>(d), 0, 0)
                       : cat(rows, static_cast<int64_t>(d));
  }
  return out.contiguous();
}

// The local block the rank at `coordinate` holds of `full` under `placements`.
inline Tensor local_block(const Tensor& full, const Shape& mesh_shape, const Placements& placements,
                          const std::vector<int64_t>& coordinate) {
  return take(full, held_indices(full.sizes(), mesh_shape, placements, coordinate));
}

// The mesh coordinate of the rank at `index` in row-major order.
inline std::vector<int64_t> coordinate_of(int64_t index, const Shape& mesh_shape) {
  std::vector<int64_t> c(mesh_shape.size());
  for (size_t m = mesh_shape.size(); m-- > 0;) {
    c[m] = index % mesh_shape[m];
    index /= mesh_shape[m];
  }
  return c;
}

}  // namespace tessera::dtensor_test::independent
