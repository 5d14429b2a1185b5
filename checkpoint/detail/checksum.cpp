#include "tessera/checkpoint/detail/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera::checkpoint::detail {

uint64_t xxh3(const void* data, size_t n) { return XXH3_64bits(data, n); }

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Stream::update(const void* data, size_t n) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, n);
}

uint64_t Xxh3Stream::digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

std::vector<uint64_t> block_checksums(const void* data, size_t n, size_t block_bytes) {
  std::vector<uint64_t> out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t at = 0; at < n; at += block_bytes) {
    out.push_back(XXH3_64bits(p + at, n - at < block_bytes ? n - at : block_bytes));
  }
  return out;
}

}  // namespace tessera::checkpoint::detail
