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
// The integer grid sits on the kinks of piecewise ops (0 for abs and relu, the bounds of clamp,
// ties of maximum / minimum), where a gradient convention or a wrong claim could pass unseen: an
// entry of such an op whose gradient is checked moves its input off them in its call (abs of
// v - 0.5 on kPositive, relu and clamp of v + 0.5, the second operand of maximum / minimum
// + 0.25); the plain abs and relu entries of the unary list check values only.
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
