#pragma once
// tessera-checkpoint verify: every byte of every chunk read and checked, and the metadata's
// geometry with it.

#include <cstdint>
#include <string>

namespace tessera::checkpoint_tool {

struct VerifySummary {
  int64_t tensors = 0;
  int64_t chunks = 0;
  uint64_t bytes = 0;
};

// Checks, tensor by tensor in name order: its chunks cover it exactly once; each chunk file's
// safetensors header parses and lists the chunk where the metadata says it is (as any standard
// reader would find it); then every chunk against its XXH3 and its blocks' XXH3. Errors
// (CheckpointError): the first problem, naming the file and the tensor.
VerifySummary verify(const std::string& dir);

}  // namespace tessera::checkpoint_tool
