#include "tessera/autograd/nn/normalization.h"

#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::nn {
namespace {

void check_normalized_shape(const Shape& shape, const char* op) {
  bool valid = !shape.empty();
  for (int64_t size : shape) valid = valid && size >= 0;
  TS_CHECK_SHAPE(valid, "[", op, "] normalized_shape must be non-empty with sizes >= 0, got ",
                 shape);
}

}  // namespace

LayerNorm::LayerNorm(const Shape& normalized_shape, double eps, bool elementwise_affine, bool bias,
                     TensorOptions options)
    : Module("LayerNorm"), normalized_shape_(normalized_shape), eps_(eps) {
  check_normalized_shape(normalized_shape, "LayerNorm");
  if (!elementwise_affine) return;
  NoGradGuard no_grad;
  options = options.requires_grad(false);
  weight_ = register_parameter("weight", ones(normalized_shape, options));
  if (bias) bias_ = register_parameter("bias", zeros(normalized_shape, options));
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape_, weight_.defined() ? parameter("weight") : Tensor(),
                    bias_.defined() ? parameter("bias") : Tensor(), eps_);
}

RMSNorm::RMSNorm(const Shape& normalized_shape, std::optional<double> eps, bool elementwise_affine,
                 TensorOptions options)
    : Module("RMSNorm"), normalized_shape_(normalized_shape), eps_(eps) {
  check_normalized_shape(normalized_shape, "RMSNorm");
  if (!elementwise_affine) return;
  NoGradGuard no_grad;
  weight_ = register_parameter("weight", ones(normalized_shape, options.requires_grad(false)));
}

Tensor RMSNorm::forward(const Tensor& input) {
  return rms_norm(input, normalized_shape_, weight_.defined() ? parameter("weight") : Tensor(),
                  eps_);
}

}  // namespace tessera::nn
