#pragma once
// nn::Dropout (torch.nn.Dropout): in training mode, zeroes each element with probability p and
// scales the others by 1/(1-p); in eval mode, the identity.

#include "tessera/autograd/nn/module.h"
#include "tessera/runtime/generator.h"

namespace tessera::nn {

class Dropout : public Module {
 public:
  // Masks are drawn from `gen` (the default generator when null), which must outlive the module.
  // Errors: p outside [0, 1].
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);

  Tensor forward(const Tensor& input) override;

  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace tessera::nn
