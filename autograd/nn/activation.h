#pragma once
// Activation modules (torch.nn.ReLU, torch.nn.GELU), so that activations can sit in a Sequential.

#include <string>

#include "tessera/autograd/nn/module.h"

namespace tessera::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class GELU : public Module {
 public:
  // approximate: "none" (erf) or "tanh", as torch.nn.GELU. Errors: any other value.
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;

  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

}  // namespace tessera::nn
