#pragma once
// DTensorSpec: everything about a DTensor but its local data — mesh, placements and the global
// tensor's shape, stride and dtype (torch DTensorSpec + TensorMeta).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/dtensor/device_mesh.h"
#include "tessera/dtensor/placement.h"
#include "tessera/dtensor/sharding.h"
#include "tessera/runtime/dtype.h"
#include "tessera/runtime/shape.h"

namespace tessera {

struct DTensorSpec {
  DeviceMesh mesh;
  Placements placements;
  Shape shape;
  Shape stride;
  DType dtype = kFloat32;

  // Number of shards of the tensor: the product of the mesh sizes of the sharded mesh dims.
  int64_t num_shards() const;
  // Local shape / global index runs of the rank at `coordinate` (the calling rank by default).
  Shape local_shape() const;
  Shape local_shape(const std::vector<int64_t>& coordinate) const;
  std::vector<std::vector<dtensor::Run>> global_runs(const std::vector<int64_t>& coordinate) const;
  // The calling rank's coordinate in the mesh.
  std::vector<int64_t> coordinate() const;
  std::string to_string() const;
};

namespace dtensor {

// Checks placements against a mesh and a tensor rank and returns them normalized (negative shard
// dims wrapped). `op` names the caller in errors: wrong count for the mesh, shard dim out of
// range, split_factor < 1, mixed Partial reduce ops (only {sum, avg} may mix, as PyTorch).
Placements normalize_placements(const char* op, const Placements& placements,
                                const DeviceMesh& mesh, int64_t tensor_ndim);

// Placements of a gradient for a forward placement list: Partial becomes Replicate.
Placements normalize_for_grad(const Placements& placements);

}  // namespace dtensor
}  // namespace tessera
