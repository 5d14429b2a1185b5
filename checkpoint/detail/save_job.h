#pragma once
// A save in two parts: staging on the calling rank thread (the collectives a DTensor needs, and
// for async_save the copies into staging buffers), then writing and committing, which an
// async_save runs in a background thread over a process group of its own.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/checkpoint/detail/boxes.h"
#include "tessera/checkpoint/detail/files.h"
#include "tessera/collectives/process_group.h"

namespace tessera::checkpoint::detail {

struct StagedChunk {
  std::string key;
  Box box;
  Tensor data;  // CPU, contiguous, shape box.sizes
};

struct SaveJob {
  std::string dir;
  std::string save_id;
  dist::ProcessGroupPtr group;  // null: not distributed
  int rank = 0;
  int world_size = 1;
  // Every tensor this rank holds (dtype, global shape), whether or not it writes a chunk of it.
  std::map<std::string, std::pair<DType, Shape>> tensors;
  std::vector<StagedChunk> chunks;  // the ones this rank writes
  std::map<std::string, Scalar> scalars;
  std::optional<DirectoryLock> lock;  // held by rank 0 until the commit
};

// Collective over `group` (every rank with its own state). `copy`: stage copies (async_save),
// else views of the tensors where they are contiguous on the CPU. Errors on every rank.
SaveJob stage_save(const StateDict& state, const std::string& dir, dist::ProcessGroupPtr group,
                   bool copy);
// Writes this rank's file, then (collective) rank 0 commits the metadata. Errors on every rank;
// a failed save removes its files and leaves the previous checkpoint as it was.
void write_and_commit(SaveJob& job);

}  // namespace tessera::checkpoint::detail
