#pragma once
// nn::Linear (torch.nn.Linear): y = x @ weight^T + bias, weight [out, in], bias [out].

#include <cstdint>

#include "tessera/autograd/nn/module.h"
#include "tessera/runtime/generator.h"
#include "tessera/runtime/tensor_options.h"

namespace tessera::nn {

class Linear : public Module {
 public:
  // PyTorch's initialization (kaiming_uniform with a = sqrt(5)): weight and bias uniform in
  // [-1/sqrt(in), 1/sqrt(in)], drawn from `gen` (the default generator when null), weight first.
  // `options` sets dtype and device (float32 on CPU by default). Errors: negative sizes.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions options = {},
         Generator* gen = nullptr);

  // x [..., in] -> [..., out].
  Tensor forward(const Tensor& input) override;

  const Tensor& weight() const { return weight_; }
  // Undefined without bias.
  const Tensor& bias() const { return bias_; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

 private:
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tessera::nn
