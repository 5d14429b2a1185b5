#pragma once
// Whether a tensor's chunks hold every element of it exactly once: the metadata's own check of
// the geometry (the checksums say the bytes are what was written, not that they are all of it).

#include <string>

#include "tessera/checkpoint/detail/metadata.h"

namespace tessera::checkpoint_tool {

// Errors (CheckpointError, prefixed with `op`, naming `dir`, the tensor and the chunks' files
// and boxes): two chunks that overlap; chunks that hold fewer or more elements than the tensor.
void check_coverage(const std::string& op, const std::string& dir, const std::string& key,
                    const checkpoint::detail::TensorRecord& tensor);

}  // namespace tessera::checkpoint_tool
