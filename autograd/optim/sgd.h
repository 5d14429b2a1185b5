#pragma once
// optim::SGD (torch.optim.SGD): stochastic gradient descent with optional momentum (heavy-ball or
// Nesterov), dampening and L2 weight decay, in PyTorch's update order:
//   g = grad (negated with maximize);  g += weight_decay * p
//   with momentum: buf = g on the first step, else buf = momentum * buf + (1 - dampening) * g;
//                  g = nesterov ? g + momentum * buf : buf
//   p -= lr * g

#include <vector>

#include "tessera/autograd/optim/optimizer.h"

namespace tessera::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;

  // Errors: a negative lr, momentum or weight_decay; nesterov without momentum or with dampening.
  void validate(const char* op) const;
};

struct SGDState {
  Tensor momentum_buffer;  // undefined until the first step with momentum
};

// One update of `param` in place from `grad` (see Note [Optimizer updates on shards]). Call under
// NoGradGuard when param requires grad.
void sgd_update(Tensor param, const Tensor& grad, SGDState& state, const SGDOptions& options);

class SGD : public GroupedOptimizer<SGDOptions, SGDState, sgd_update> {
 public:
  explicit SGD(const std::vector<Tensor>& params, SGDOptions options = {})
      : SGD(std::vector<ParamGroup<SGDOptions>>{{params, options}}) {}
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups)
      : GroupedOptimizer("SGD", std::move(groups)) {}
};

}  // namespace tessera::optim
