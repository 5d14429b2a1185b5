#pragma once
// A DTensor op's local computation runs on this rank's shards, so an Error it raises names local
// shapes ("[1, 5] and [4, 5]" for global 4 x 5 tensors). Raised again, of the same type, with
// the op's DTensor arguments described as the user knows them: global shape and placements,
// beside the local shard the error saw.

#include <memory>
#include <vector>

#include "tessera/dtensor/dtensor_spec.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

// `specs[i]` null: input i was not a DTensor (or absent). `ran_as[i]`: the placements input i
// was redistributed to before the local op ran.
[[noreturn]] void rethrow_with_global_shapes(
    const Error& error, const char* op,
    const std::vector<std::shared_ptr<const DTensorSpec>>& specs,
    const std::vector<Placements>& ran_as, const std::vector<Tensor>& locals);

}  // namespace tessera::dtensor
