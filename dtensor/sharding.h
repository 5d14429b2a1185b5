#pragma once
// Which elements of a global tensor a rank holds, for any list of placements.
//
// Note [Uneven shards]
// A dim of length L sharded over n ranks follows torch.chunk: chunks of ceil(L / n), the last ones
// smaller or empty (L = 5 on 4 ranks: 2, 2, 1, 0). Several mesh dims sharding one tensor dim apply
// left to right, each chunking what the previous ones left: on a 2x2 mesh [S(0), S(0)] with L = 5
// gives 3 -> (2, 1) and 2 -> (1, 1), not the flat 2, 2, 1, 0.
//
// Note [StridedShard]
// StridedShard(d, sf) on a mesh dim of n ranks cuts what is left of dim d into sf pieces
// (torch.chunk), chunks every piece over the n ranks, and gives rank i its chunk of each piece, in
// piece order. It is how a later Shard of the same dim "applies first": [StridedShard(0, 2),
// Shard(0)] on 2x2 over 8 rows gives rank (i, j) rows 4j + 2i .. 4j + 2i + 1, the layout of
// sharding over mesh dim 1 first and mesh dim 0 second.
//
// The general description used everywhere below is a list of runs of global indices per tensor
// dim: the local tensor is the concatenation, dim by dim, of the global elements in those runs.

#include <cstdint>
#include <vector>

#include "tessera/dtensor/placement.h"
#include "tessera/runtime/shape.h"

namespace tessera::dtensor {

// A run of consecutive indices [offset, offset + size).
struct Run {
  int64_t offset = 0;
  int64_t size = 0;
  bool operator==(const Run&) const = default;
};

// Chunk `index` of torch.chunk(length, parts): size and offset (offset clamps to length for the
// empty chunks past the end).
Run chunk_of(int64_t length, int64_t parts, int64_t index);

// The positions (within a sequence of `length`) that rank `index` of `parts` holds under a shard
// with `split_factor` pieces (1 for a plain Shard): one run per piece, in order.
std::vector<Run> shard_positions(int64_t length, int64_t parts, int64_t index,
                                 int64_t split_factor);

// Per tensor dim, the runs of global indices the rank at `coordinate` holds. Partial and
// Replicate leave dims whole.
std::vector<std::vector<Run>> global_runs(const Shape& global_shape, const Shape& mesh_shape,
                                          const Placements& placements,
                                          const std::vector<int64_t>& coordinate);

// The local shape of the rank at `coordinate`.
Shape local_shape(const Shape& global_shape, const Shape& mesh_shape, const Placements& placements,
                  const std::vector<int64_t>& coordinate);

// Total size of runs.
int64_t total_size(const std::vector<Run>& runs);

}  // namespace tessera::dtensor
