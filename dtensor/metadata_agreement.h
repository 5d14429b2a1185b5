#pragma once
// Checks that the ranks of a mesh agree on what tensors they hold (dtype, local and global
// shape) before anything is built on the assumption, so a disagreement is named where it is made
// (from_local's run_check, local_map's outputs), not by a later collective of unequal sizes.

#include <string>
#include <vector>

#include "tessera/dtensor/device_mesh.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

struct TensorMetadata {
  std::string name;  // what the tensor is to the caller, e.g. "output 1"
  DType dtype = kFloat32;
  Shape local_shape;
  Shape global_shape;
};

// One small all_gather per mesh dim (agreement along every mesh dim is agreement over the mesh);
// every rank gets every rank's entries, so where two differ every rank raises, naming `op`, the
// first entry that differs, this rank's metadata and the other's (by global rank), then `advice`.
// Entries must be as many on every rank; tensors of more than 8 dims are refused.
void check_metadata_agreement(const char* op, const std::vector<TensorMetadata>& entries,
                              const DeviceMesh& mesh, const std::string& advice);

}  // namespace tessera::dtensor
