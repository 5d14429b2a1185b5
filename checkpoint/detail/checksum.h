#pragma once
// XXH3-64 (Debian's libxxhash-dev, inlined: no library to link) of a chunk and of its blocks.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::checkpoint::detail {

uint64_t xxh3(const void* data, size_t n);
// XXH3-64 of data given in pieces.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(const void* data, size_t n);
  uint64_t digest() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

// The checksum of each `block_bytes` of data (the last block shorter).
std::vector<uint64_t> block_checksums(const void* data, size_t n, size_t block_bytes);

}  // namespace tessera::checkpoint::detail
