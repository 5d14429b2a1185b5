#pragma once
// Note [Generators agree across a mesh]
// A random op on a DTensor draws each element from its global index (Note [Random ops on
// distributed tensors] in runtime/ops/random.cpp), which gives the single-device values only if
// every rank's generator holds the same (seed, offset). Ranks seeded differently
// (manual_seed(100 + rank)) would otherwise give a Replicate DTensor different values per rank,
// silently. As PyTorch's OffsetBasedRNGTracker (run_state_sync: rank 0's state broadcast), the
// first distributed random op after a manual_seed broadcasts the state of the mesh's first rank
// (coordinate 0 on every mesh dim) to the mesh's ranks: one 16-byte broadcast, which
// CommDebugMode shows; later ops on that mesh communicate nothing until the next manual_seed.
// A random op on another mesh agrees again over that one.

#include "tessera/dtensor/device_mesh.h"
#include "tessera/runtime/generator.h"

namespace tessera::dtensor {

// Makes gen's state that of the mesh's first rank, unless it was made so over this mesh since
// the last manual_seed. A collective over the mesh: every rank of it calls it.
void agree_generator(const DeviceMesh& mesh, Generator& gen);

}  // namespace tessera::dtensor
