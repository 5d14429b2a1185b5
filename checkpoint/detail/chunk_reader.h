#pragma once
// Reads the parts of saved chunks that a block needs (Note [Checkpoint loads read only what they
// need] in checkpoint/checkpoint.h): load, load_safetensors and tessera-checkpoint consolidate.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tessera/checkpoint/detail/boxes.h"
#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/metadata.h"

namespace tessera::checkpoint::detail {

// "offsets [0, 4] sizes [2, 4]", for messages.
std::string describe_box(const Shape& offsets, const Shape& sizes);

class ChunkReader {
 public:
  // Chunk files are opened (once each) under `dir`; `op` names the caller in errors.
  ChunkReader(std::string dir, const char* op) : dir_(std::move(dir)), op_(op) {}

  // Copies `overlap` (global coordinates) of `chunk`, a chunk of tensor `key`, into `dst`: the
  // bytes of a row-major array of `dst_sizes` of which `block` is a block. Reads slabs of rows
  // of at most 64 MiB and checks each checksummed block it reads (a chunk without block
  // checksums, from a plain safetensors file, is read unchecked). Errors (CheckpointError): a
  // checksum mismatch or a truncated file, naming file, tensor and bytes.
  void read_overlap(const std::string& key, const TensorRecord& tensor, const ChunkRecord& chunk,
                    const Box& overlap, const LocalBlock& block, std::byte* dst,
                    const Shape& dst_sizes);

  // Reads the whole chunk and checks it against its chunk checksum and block checksums.
  void verify_chunk(const std::string& key, const ChunkRecord& chunk);

 private:
  const File& open(const std::string& name);
  void verify_blocks(const std::string& key, const ChunkRecord& chunk, const std::byte* data,
                     int64_t lo, int64_t hi) const;
  // At least n bytes: grown, never zero-filled, and kept by the thread across loads (a fresh
  // buffer's first touch is the slow part of a read). Static: a thread reads one chunk at a time.
  static std::byte* buffer(size_t n);

  std::string dir_;
  const char* op_;
  std::map<std::string, File> files_;
};

}  // namespace tessera::checkpoint::detail
