#include "tessera/dtensor/dtensor_spec.h"

#include <set>
#include <sstream>

#include "tessera/runtime/error.h"

namespace tessera {

int64_t DTensorSpec::num_shards() const {
  int64_t n = 1;
  for (size_t m = 0; m < placements.size(); ++m) {
    if (placements[m].is_shard()) n *= mesh.size(static_cast<int64_t>(m));
  }
  return n;
}

std::vector<int64_t> DTensorSpec::coordinate() const {
  std::optional<std::vector<int64_t>> c = mesh.get_coordinate();
  TS_CHECK(c.has_value(), "[DTensor] this rank is not in ", mesh.to_string());
  return *c;
}

Shape DTensorSpec::local_shape() const { return local_shape(coordinate()); }

Shape DTensorSpec::local_shape(const std::vector<int64_t>& coord) const {
  return dtensor::local_shape(shape, mesh.shape(), placements, coord);
}

std::vector<std::vector<dtensor::Run>> DTensorSpec::global_runs(
    const std::vector<int64_t>& coord) const {
  return dtensor::global_runs(shape, mesh.shape(), placements, coord);
}

std::string DTensorSpec::to_string() const {
  std::ostringstream os;
  os << "DTensorSpec(" << tessera::to_string(placements) << ", shape " << shape << ", " << dtype
     << ", " << mesh << ")";
  return os.str();
}

namespace dtensor {

Placements normalize_placements(const char* op, const Placements& placements,
                                const DeviceMesh& mesh, int64_t tensor_ndim) {
  TS_CHECK(static_cast<int64_t>(placements.size()) == mesh.ndim(), "[", op, "] got ",
           placements.size(), " placements ", placements, " for a ", mesh.ndim(),
           "-D mesh of shape ", mesh.shape(), "; give exactly one placement per mesh dim");
  Placements out;
  std::set<dist::ReduceOp> partial_ops;
  for (const Placement& p : placements) {
    if (p.is_partial()) partial_ops.insert(p.reduce_op());
    if (!p.is_shard()) {
      out.push_back(p);
      continue;
    }
    const int64_t d = p.dim();
    TS_CHECK(d >= -tensor_ndim && d < tensor_ndim, "[", op, "] ", p, " in ", placements,
             " is out of range for a tensor of ", tensor_ndim, " dims (valid: ", -tensor_ndim,
             " to ", tensor_ndim - 1, ")");
    TS_CHECK(p.split_factor() >= 1, "[", op, "] ", p, " needs split_factor >= 1");
    out.push_back(with_shard_dim(p, d < 0 ? d + tensor_ndim : d));
  }
  const bool mixable =
      partial_ops == std::set<dist::ReduceOp>{dist::ReduceOp::Sum, dist::ReduceOp::Avg};
  if (partial_ops.size() > 1 && !mixable) {
    std::string ops;
    for (dist::ReduceOp o : partial_ops)
      ops += (ops.empty() ? "" : ", ") + std::string(reduce_op_name(o));
    TS_CHECK(false, "[", op, "] mixed Partial reduce types are not supported in the same ",
             "placement list ", placements, ": found reduce ops {", ops,
             "}; only sum and avg may be mixed");
  }
  return out;
}

Placements normalize_for_grad(const Placements& placements) {
  Placements out;
  for (const Placement& p : placements) {
    if (p.is_partial()) {
      out.push_back(Replicate());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace dtensor
}  // namespace tessera
