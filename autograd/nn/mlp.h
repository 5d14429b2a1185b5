#pragma once
// nn::MLP: Linear layers of the given sizes with an activation (and optional Dropout) between
// them, as a Sequential, so parameter names follow the layer positions ("0.weight", "2.bias").

#include <cstdint>
#include <vector>

#include "tessera/autograd/nn/sequential.h"
#include "tessera/runtime/generator.h"
#include "tessera/runtime/tensor_options.h"

namespace tessera::nn {

enum class Activation { ReLU, GELU };

struct MLPOptions {
  Activation activation = Activation::ReLU;
  // > 0: a Dropout(dropout) after every activation.
  double dropout = 0.0;
  bool bias = true;
  // dtype and device of the parameters.
  TensorOptions tensor_options = {};
  // Draws the Linear initializations (in layer order) and the dropout masks; the default
  // generator when null. Must outlive the module when dropout > 0.
  Generator* generator = nullptr;
};

class MLP : public Sequential {
 public:
  // sizes {in, hidden_1, ..., out}: Linear(sizes[i], sizes[i + 1]) for each i, each but the last
  // followed by the activation and, with dropout, a Dropout.
  // Errors: fewer than two sizes, a negative size, dropout outside [0, 1].
  explicit MLP(const std::vector<int64_t>& sizes, MLPOptions options = {});
};

}  // namespace tessera::nn
