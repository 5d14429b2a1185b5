#pragma once
// tessera-checkpoint info: what a checkpoint holds, from its metadata alone (no chunk is read).

#include <string>

namespace tessera::checkpoint_tool {

// An aligned table of the tensors (name, dtype, global shape, chunks, bytes), the totals (tensors,
// chunks, bytes, files, the world size that saved it) and the scalars, per-rank ones by rank.
// Errors (CheckpointError): no checkpoint in `dir`, malformed metadata.
std::string info(const std::string& dir);

}  // namespace tessera::checkpoint_tool
