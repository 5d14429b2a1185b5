#include "tessera/autograd/optim/sgd.h"

#include "tessera/runtime/ops.h"

namespace tessera::optim {

void SGDOptions::validate(const char* op) const {
  TS_CHECK(lr >= 0.0, "[", op, "] invalid learning rate: ", lr, " (must be >= 0)");
  TS_CHECK(momentum >= 0.0, "[", op, "] invalid momentum: ", momentum, " (must be >= 0)");
  TS_CHECK(weight_decay >= 0.0, "[", op, "] invalid weight_decay: ", weight_decay,
           " (must be >= 0)");
  TS_CHECK(!nesterov || (momentum > 0.0 && dampening == 0.0), "[", op,
           "] nesterov momentum requires a momentum > 0 and zero dampening, got momentum ",
           momentum, " and dampening ", dampening);
}

void SGDState::materialize(const Tensor& param, const SGDOptions& options) {
  if (options.momentum != 0.0 && !momentum_buffer.defined()) momentum_buffer = zeros_like(param);
}

void sgd_update(Tensor param, const Tensor& grad, SGDState& state, const SGDOptions& options) {
  Tensor g = options.maximize ? -grad : grad;
  if (options.weight_decay != 0.0) g = g + param * options.weight_decay;
  if (options.momentum != 0.0) {
    Tensor& buf = state.momentum_buffer;
    if (!buf.defined()) {
      buf = g.clone();  // g may still be the caller's gradient: the buffer must own its data
    } else if (state.momentum_steps == 0) {
      buf.copy_(g);  // a materialized buffer: filled in place, so references to it stay valid
    } else {
      buf *= options.momentum;
      buf += g * (1.0 - options.dampening);
    }
    ++state.momentum_steps;
    g = options.nesterov ? g + buf * options.momentum : buf;
  }
  param -= g * options.lr;
}

}  // namespace tessera::optim
