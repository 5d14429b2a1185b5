#pragma once
// One entry per way of calling an op of the sharding registry (dtensor/rules/): the registry name
// it reaches, its inputs (kind and global shape) and the call, written once against Tensor so
// that it runs on plain tensors (the reference) and on DTensors (the strategy validator,
// sharding_validator_test.cpp). The coverage test checks every registry name has an entry.

#include <functional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::dtensor_test {

// What values an input holds: integers in [-20, 20] (kValue; sums and products are exact in
// float64), the same divided by 10 (kSmall, for exp and friends), |v| + 1 (kPositive), v > 0
// (kBool), or indices in [0, 3) (kIndex).
enum class InputKind { kValue, kSmall, kPositive, kBool, kIndex };

struct InputSpec {
  InputKind kind;
  Shape shape;
};

struct OpCase {
  std::string op;  // the registry name the call reaches
  std::string family;
  std::vector<InputSpec> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  // Compare the gradients of the floating inputs too (differentiable ops).
  bool grad = true;
};

std::vector<OpCase> op_cases();

}  // namespace tessera::dtensor_test
