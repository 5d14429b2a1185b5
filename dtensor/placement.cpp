#include "tessera/dtensor/placement.h"

#include <fmt/format.h>

#include "tessera/runtime/error.h"

namespace tessera {

bool Placement::is_shard(std::optional<int64_t> dim) const {
  const bool shard = kind_ == PlacementKind::Shard || kind_ == PlacementKind::StridedShard;
  return shard && (!dim.has_value() || *dim == dim_);
}

bool Placement::is_partial(std::optional<dist::ReduceOp> op) const {
  return kind_ == PlacementKind::Partial && (!op.has_value() || *op == op_);
}

int64_t Placement::dim() const {
  TS_CHECK(is_shard(), "[Placement] dim() of ", to_string(), ", which shards no dim");
  return dim_;
}

int64_t Placement::split_factor() const {
  TS_CHECK(is_shard(), "[Placement] split_factor() of ", to_string(), ", which shards no dim");
  return split_factor_;
}

dist::ReduceOp Placement::reduce_op() const {
  TS_CHECK(is_partial(), "[Placement] reduce_op() of ", to_string(), ", which is not Partial");
  return op_;
}

std::string Placement::to_string() const {
  switch (kind_) {
    case PlacementKind::Replicate:
      return "R";
    case PlacementKind::Shard:
      return fmt::format("S({})", dim_);
    case PlacementKind::StridedShard:
      return fmt::format("_S({}, sf={})", dim_, split_factor_);
    case PlacementKind::Partial:
      return fmt::format("P({})", dist::reduce_op_name(op_));
  }
  return "?";
}

Placement with_shard_dim(const Placement& p, int64_t dim) {
  Placement out = p;
  out.dim_ = dim;
  return out;
}

std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << p.to_string(); }

std::string to_string(const Placements& placements) {
  std::string s = "[";
  for (size_t i = 0; i < placements.size(); ++i) {
    if (i > 0) s += ", ";
    s += placements[i].to_string();
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const Placements& placements) {
  return os << to_string(placements);
}

}  // namespace tessera
