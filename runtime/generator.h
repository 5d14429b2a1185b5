#pragma once
// Generator: counter-based Philox4x32-10 random stream. A (seed, offset) pair fixes the stream:
// element i of a random fill draws from a counter fixed by offset and i alone (offset + i / 4 for
// 32-bit draws, offset + i / 2 for 64-bit ones; see Note [Philox counter layout] in
// kernels/cpu/random.cpp), so results do not depend on how the work is split across threads or
// ranks. Each fill advances offset past what it used.

#include <array>
#include <cstdint>

#include "tessera/runtime/host_device.h"

namespace tessera {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}

  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    offset_ = 0;
    agreed_on_ = 0;
  }
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Reserves `n` 128-bit counters; returns the offset of the first.
  uint64_t reserve(uint64_t n) {
    uint64_t first = offset_;
    offset_ += n;
    return first;
  }
  // Set by dtensor/ once it made this state the same on every rank of a mesh (an opaque nonzero
  // key of the mesh; Note [Generators agree across a mesh] in dtensor/generator_sync.h): ranks
  // may seed differently, and manual_seed clears it.
  uint64_t agreed_on() const { return agreed_on_; }
  void set_agreed_on(uint64_t mesh_key) { agreed_on_ = mesh_key; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
  uint64_t agreed_on_ = 0;
};

// The calling thread's (rank's) default generator.
Generator& default_generator();
// Seeds the calling thread's default generator.
void manual_seed(uint64_t seed);

// Philox4x32-10: four 32-bit outputs for a 128-bit counter and 64-bit key. Usable on host and
// device (the CUDA kernels include this header).
TS_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32_10(uint64_t counter_lo,
                                                            uint64_t counter_hi, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

// The four 32-bit draws of counter `offset + index` (a 128-bit sum: the carry goes to the high
// word) under key `seed`.
TS_HOST_DEVICE inline std::array<uint32_t, 4> philox_block(uint64_t seed, uint64_t offset,
                                                           uint64_t index) {
  const uint64_t lo = offset + index;
  return philox4x32_10(lo, lo < offset ? 1 : 0, seed);
}

// Uniform in [0, 1) from the top 24 bits of a 32-bit draw (every value exact in float).
TS_HOST_DEVICE inline float philox_uniform_float(uint32_t x) {
  return static_cast<float>(x >> 8) * 0x1p-24f;
}

// Uniform in [0, 1) from the top 53 bits of the 64-bit draw hi:lo (every value exact in double).
TS_HOST_DEVICE inline double philox_uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(x >> 11) * 0x1p-53;
}

}  // namespace tessera
