#include "tessera/autograd/nn/linear.h"

#include <cmath>

#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::nn {
namespace {

// Uniform in [-bound, bound).
Tensor uniform(const Shape& shape, double bound, TensorOptions options, Generator* gen) {
  NoGradGuard no_grad;
  return rand(shape, options, gen) * (2.0 * bound) - bound;
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, TensorOptions options,
               Generator* gen)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  TS_CHECK_SHAPE(in_features >= 0 && out_features >= 0,
                 "[Linear] in_features and out_features must be >= 0, got ", in_features, " and ",
                 out_features);
  // kaiming_uniform(a = sqrt(5)) gives gain sqrt(1/3) * sqrt(3 / fan_in) = 1/sqrt(fan_in); with no
  // inputs there is nothing to scale (PyTorch leaves the bound at 0).
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  weight_ = register_parameter("weight", uniform({out_features, in_features}, bound, options, gen));
  if (bias) bias_ = register_parameter("bias", uniform({out_features}, bound, options, gen));
}

Tensor Linear::forward(const Tensor& input) {
  TS_CHECK_SHAPE(input.dim() >= 1 && input.size(-1) == in_features_,
                 "[Linear] expected input of shape [..., ", in_features_, "], got ", input.shape());
  return linear(input, parameter("weight"), bias_.defined() ? parameter("bias") : Tensor());
}

}  // namespace tessera::nn
