#pragma once
// XXH3-64 (Debian's libxxhash-dev, inlined: no library to link) of a chunk and of its blocks.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::checkpoint::detail {

uint64_t xxh3(const void* data, size_t n);
// The checksum of each `block_bytes` of data (the last block shorter).
std::vector<uint64_t> block_checksums(const void* data, size_t n, size_t block_bytes);

}  // namespace tessera::checkpoint::detail
