#include "tessera/autograd/nn/activation.h"

#include "tessera/runtime/ops.h"

namespace tessera::nn {

Tensor ReLU::forward(const Tensor& input) { return relu(input); }

GELU::GELU(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  TS_CHECK(approximate_ == "none" || approximate_ == "tanh",
           "[GELU] approximate must be \"none\" or \"tanh\", got \"", approximate_, "\"");
}

Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate_); }

}  // namespace tessera::nn
