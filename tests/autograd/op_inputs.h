#pragma once
// Inputs for the per-op gradient tests: float64 leaves that require grad, in the layouts the
// formulas must handle (contiguous, non-contiguous, broadcast against each other, zero-size).

#include <cstdint>

#include "tessera/tessera.h"

namespace tessera::autograd_test {

// A contiguous float64 leaf with values in [low, high), reproducible from seed.
inline Tensor random_leaf(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0) {
  Generator gen(seed);
  Tensor t = rand(shape, kFloat64, &gen) * (high - low) + low;
  t.requires_grad_();
  return t;
}

// A non-contiguous float64 leaf of `shape` (rank >= 2): the transpose of a contiguous tensor
// with the last two dims swapped.
inline Tensor transposed_leaf(const Shape& shape, uint64_t seed, double low = -1.0,
                              double high = 1.0) {
  Shape swapped = shape;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Tensor t = random_leaf(swapped, seed, low, high).detach().transpose(-1, -2);
  t.requires_grad_();
  return t;
}

// A positive leaf, for log / sqrt / rsqrt / pow bases.
inline Tensor positive_leaf(const Shape& shape, uint64_t seed) {
  return random_leaf(shape, seed, 0.5, 2.0);
}

}  // namespace tessera::autograd_test
