#pragma once
// Cutting and joining local tensors by global index runs (see dtensor/sharding.h): the data
// movement of every redistribute step reduces to these once the collective has brought the
// pieces in.

#include <utility>
#include <vector>

#include "tessera/dtensor/sharding.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

// A tensor whose positions along a dim hold the global indices `runs` (in order).
struct RunSource {
  Tensor tensor;
  std::vector<Run> runs;
};

// The elements at global indices `want` along `dim`, in order, taken from the sources (each
// wanted index must be held by one of them). The result may be a view of a source when one
// narrow suffices; otherwise a new contiguous tensor.
Tensor assemble_runs(int64_t dim, const std::vector<Run>& want,
                     const std::vector<RunSource>& sources);

}  // namespace tessera::dtensor
