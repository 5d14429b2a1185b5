#pragma once
// optim::SGD (torch.optim.SGD): stochastic gradient descent with optional momentum (heavy-ball or
// Nesterov), dampening and L2 weight decay, in PyTorch's update order:
//   g = grad (negated with maximize);  g += weight_decay * p
//   with momentum: buf = g on the first step, else buf = momentum * buf + (1 - dampening) * g;
//                  g = nesterov ? g + momentum * buf : buf
//   p -= lr * g

#include <cstdint>
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
  template <typename F>
  void for_each_field(F&& f) {
    f("lr", lr);
    f("momentum", momentum);
    f("dampening", dampening);
    f("weight_decay", weight_decay);
    f("nesterov", nesterov);
    f("maximize", maximize);
  }
};

struct SGDState {
  // Defined with a momentum; its first update copies the gradient into it (torch's clone), the
  // next ones accumulate.
  Tensor momentum_buffer;
  int64_t momentum_steps = 0;  // updates that used the buffer

  // The state the first update would create (Note [Optimizer state in checkpoints]).
  void materialize(const Tensor& param, const SGDOptions& options);
  template <typename F>
  void for_each_field(F&& f) {
    f("momentum_steps", momentum_steps);
    f("momentum_buffer", momentum_buffer);
  }
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
