#pragma once
// tessera-checkpoint consolidate: a checkpoint as one standard safetensors file of full tensors
// (what load_safetensors and other frameworks' readers take), written with bounded memory.

#include <cstdint>
#include <string>

namespace tessera::checkpoint_tool {

struct ConsolidateOptions {
  // The most bytes of a tensor held at once (one slab: tools/checkpoint/slabs.h); the tests set
  // it small to split tensors.
  int64_t slab_bytes = int64_t{64} << 20;
};

struct ConsolidateSummary {
  int64_t tensors = 0;
  uint64_t bytes = 0;  // of the file
};

// Writes every tensor of the checkpoint in `dir` at its global shape into `out`, the scalars in
// "__metadata__" as strings (a per-rank scalar as "rank<r>/<name>"). Reads each chunk's overlap
// with each slab (checking the blocks it reads against their XXH3) into the slab, writes it, and
// at the end fsyncs and renames `out`.tmp to `out`, so that a failed run leaves no partial file.
// Errors (CheckpointError): no checkpoint in `dir`, chunks that do not cover a tensor once, a
// checksum mismatch or a truncated chunk file (naming file and tensor), `out` not writable or
// one of the checkpoint's own files.
ConsolidateSummary consolidate(const std::string& dir, const std::string& out,
                               const ConsolidateOptions& options = {});

}  // namespace tessera::checkpoint_tool
