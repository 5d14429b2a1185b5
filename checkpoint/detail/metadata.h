#pragma once
// The metadata of a checkpoint (Note [Checkpoint directory layout] in checkpoint/checkpoint.h):
// what every global tensor is and where its chunks lie, as JSON. The same records carry each
// rank's part of a save to rank 0.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/runtime/dtype.h"
#include "tessera/runtime/shape.h"

namespace tessera::checkpoint::detail {

inline constexpr const char* kMetadataFile = "tessera_checkpoint.json";
inline constexpr const char* kFormatName = "tessera-checkpoint";
inline constexpr int kFormatVersion = 1;
// The checksum granularity of reads (Note [Checkpoint loads read only what they need]).
inline constexpr uint64_t kChecksumBlockBytes = uint64_t{4} << 20;

struct ChunkRecord {
  std::string file;  // relative to the directory
  std::string name;  // its tensor name in the safetensors file
  Shape offsets;     // in the global tensor
  Shape sizes;
  uint64_t file_offset = 0;  // absolute, of its first byte
  uint64_t nbytes = 0;
  uint64_t xxh3 = 0;  // of the whole chunk
  uint64_t block_bytes = kChecksumBlockBytes;
  std::vector<uint64_t> block_xxh3;  // of each block_bytes of it, the last one shorter
};

struct TensorRecord {
  DType dtype = kFloat32;
  Shape shape;
  std::vector<ChunkRecord> chunks;
};

struct Metadata {
  int world_size = 1;
  std::string save_id;
  std::map<std::string, TensorRecord> tensors;
  std::map<std::string, Scalar> scalars;                      // equal on every saving rank
  std::map<int, std::map<std::string, Scalar>> rank_scalars;  // differing: per rank
};

std::string to_json(const Metadata& metadata);
// Errors (CheckpointError, naming `source`): not JSON, another format or version, fields
// missing or of the wrong type.
Metadata metadata_from_json(const std::string& json, const std::string& source);

// DIR's committed metadata. Errors: no such directory; no metadata (an incomplete or
// interrupted save, or not a checkpoint); malformed.
Metadata read_metadata(const std::string& dir);

// "0123456789abcdef" and back.
std::string hex64(uint64_t value);

}  // namespace tessera::checkpoint::detail
