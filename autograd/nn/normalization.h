#pragma once
// nn::LayerNorm and nn::RMSNorm (torch.nn.LayerNorm / torch.nn.RMSNorm): normalize over the
// trailing dims `normalized_shape` of the input, then scale (and for LayerNorm, shift) elementwise.

#include <optional>

#include "tessera/autograd/nn/module.h"
#include "tessera/runtime/shape.h"
#include "tessera/runtime/tensor_options.h"

namespace tessera::nn {

class LayerNorm : public Module {
 public:
  // With elementwise_affine: weight (ones) and, with bias, bias (zeros), both of normalized_shape.
  // Errors: an empty normalized_shape or one with a negative size.
  LayerNorm(const Shape& normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
            bool bias = true, TensorOptions options = {});

  // Errors (from layer_norm): the input's trailing dims differ from normalized_shape.
  Tensor forward(const Tensor& input) override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }
  // Undefined without elementwise_affine (bias also without bias).
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  Shape normalized_shape_;
  double eps_;
  Tensor weight_;
  Tensor bias_;
};

class RMSNorm : public Module {
 public:
  // eps absent: the input dtype's machine epsilon (torch's default). With elementwise_affine:
  // weight (ones) of normalized_shape. Errors as LayerNorm.
  explicit RMSNorm(const Shape& normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true, TensorOptions options = {});

  Tensor forward(const Tensor& input) override;

  const Shape& normalized_shape() const { return normalized_shape_; }
  std::optional<double> eps() const { return eps_; }
  const Tensor& weight() const { return weight_; }

 private:
  Shape normalized_shape_;
  std::optional<double> eps_;
  Tensor weight_;
};

}  // namespace tessera::nn
