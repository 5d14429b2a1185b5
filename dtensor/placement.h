#pragma once
// How a DTensor is laid out along one mesh dimension (torch.distributed.tensor.placement_types).
//
//   Shard(d)               each rank of the mesh dim holds one torch.chunk of tensor dim d
//   Replicate()            every rank holds the whole tensor
//   Partial(op)            every rank holds a partial value; the tensor is op over the ranks
//   StridedShard(d, sf)    tensor dim d cut into sf pieces, each piece chunked over the ranks, a
//                          rank holding its chunk of every piece (right-to-left sharding, see
//                          Note [StridedShard] in dtensor/sharding.h)
//
// All four are one value type (the subclasses only name constructors), so that Placements — a
// std::vector<Placement> — holds them by value. Printed as PyTorch prints them: S(0), R, P(sum),
// _S(0, sf=2).

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/collectives/reduce_op.h"

namespace tessera {

enum class PlacementKind : uint8_t { Replicate, Shard, StridedShard, Partial };

class Placement {
 public:
  PlacementKind kind() const { return kind_; }
  // Shard or StridedShard (of tensor dim `dim` when given), as _StridedShard is a Shard in torch.
  bool is_shard(std::optional<int64_t> dim = std::nullopt) const;
  bool is_strided_shard() const { return kind_ == PlacementKind::StridedShard; }
  bool is_replicate() const { return kind_ == PlacementKind::Replicate; }
  // Partial (with reduce op `op` when given).
  bool is_partial(std::optional<dist::ReduceOp> op = std::nullopt) const;

  // The sharded tensor dim (Shard / StridedShard only).
  int64_t dim() const;
  // The number of pieces of a StridedShard (1 for a plain Shard).
  int64_t split_factor() const;
  // The reduce op of a Partial.
  dist::ReduceOp reduce_op() const;

  std::string to_string() const;
  bool operator==(const Placement& other) const = default;

 protected:
  Placement(PlacementKind kind, int64_t dim, int64_t split_factor, dist::ReduceOp op)
      : kind_(kind), dim_(dim), split_factor_(split_factor), op_(op) {}

 private:
  friend Placement with_shard_dim(const Placement& p, int64_t dim);
  PlacementKind kind_;
  int64_t dim_;
  int64_t split_factor_;
  dist::ReduceOp op_;
};

struct Replicate : Placement {
  Replicate() : Placement(PlacementKind::Replicate, 0, 1, dist::ReduceOp::Sum) {}
};
struct Shard : Placement {
  explicit Shard(int64_t dim) : Placement(PlacementKind::Shard, dim, 1, dist::ReduceOp::Sum) {}
};
struct StridedShard : Placement {
  StridedShard(int64_t dim, int64_t split_factor)
      : Placement(PlacementKind::StridedShard, dim, split_factor, dist::ReduceOp::Sum) {}
};
struct Partial : Placement {
  explicit Partial(dist::ReduceOp op = dist::ReduceOp::Sum)
      : Placement(PlacementKind::Partial, 0, 1, op) {}
};

using Placements = std::vector<Placement>;

// The same placement sharding `dim` instead (used to normalize negative dims).
Placement with_shard_dim(const Placement& p, int64_t dim);

std::ostream& operator<<(std::ostream& os, const Placement& p);
// "[S(0), R]".
std::string to_string(const Placements& placements);
std::ostream& operator<<(std::ostream& os, const Placements& placements);

}  // namespace tessera
