#pragma once
// The model the tools tests measure and simulate: small enough for a test, float64 so that every
// strategy's loss equals one device's to 1e-10, sizes divisible by 4 ranks.

#include <string>

#include "tools/shardbench/model.h"

namespace tessera::shardbench {

inline ModelConfig small_model(const std::string& preset, int64_t layers) {
  ModelConfig c;
  c.preset = preset;
  c.layers = layers;
  c.hidden = 16;
  c.heads = 4;
  c.seq = 8;
  c.batch = 4;
  c.vocab = 32;
  c.dtype = kFloat64;
  return c;
}

}  // namespace tessera::shardbench
