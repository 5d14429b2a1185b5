#include "tessera/autograd/optim/adamw.h"

#include <cmath>

#include "tessera/autograd/optim/adamw_fused.h"
#include "tessera/runtime/ops.h"

namespace tessera::optim {

void AdamWOptions::validate(const char* op) const {
  TS_CHECK(lr >= 0.0, "[", op, "] invalid learning rate: ", lr, " (must be >= 0)");
  TS_CHECK(eps >= 0.0, "[", op, "] invalid epsilon: ", eps, " (must be >= 0)");
  TS_CHECK(beta1 >= 0.0 && beta1 < 1.0, "[", op, "] invalid beta1: ", beta1,
           " (must be in [0, 1))");
  TS_CHECK(beta2 >= 0.0 && beta2 < 1.0, "[", op, "] invalid beta2: ", beta2,
           " (must be in [0, 1))");
  TS_CHECK(weight_decay >= 0.0, "[", op, "] invalid weight_decay: ", weight_decay,
           " (must be >= 0)");
}

void AdamWState::materialize(const Tensor& param, const AdamWOptions& options) {
  if (!exp_avg.defined()) exp_avg = zeros_like(param);
  if (!exp_avg_sq.defined()) exp_avg_sq = zeros_like(param);
  if (options.amsgrad && !max_exp_avg_sq.defined()) max_exp_avg_sq = zeros_like(param);
}

void adamw_update(Tensor param, const Tensor& grad, AdamWState& state,
                  const AdamWOptions& options) {
  state.materialize(param, options);
  ++state.step;
  const double steps = static_cast<double>(state.step);
  const double bias_correction1 = 1.0 - std::pow(options.beta1, steps);
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options.beta2, steps));
  if (detail::adamw_update_fused(param, grad, state, options, bias_correction1,
                                 bias_correction2_sqrt)) {
    return;
  }
  const Tensor g = options.maximize ? -grad : grad;
  // Decoupled decay: shrink the weights directly instead of adding to the gradient.
  if (options.weight_decay != 0.0) param *= 1.0 - options.lr * options.weight_decay;

  state.exp_avg *= options.beta1;
  state.exp_avg += g * (1.0 - options.beta1);
  state.exp_avg_sq *= options.beta2;
  state.exp_avg_sq += g * g * (1.0 - options.beta2);
  Tensor second_moment = state.exp_avg_sq;
  if (options.amsgrad) {
    // The running maximum of v itself (not bias-corrected), as PyTorch; materialized on first
    // use, so amsgrad may be switched on between steps.
    // In place, so that a checkpoint's reference to it stays the state.
    state.max_exp_avg_sq.copy_(maximum(state.max_exp_avg_sq, state.exp_avg_sq));
    second_moment = state.max_exp_avg_sq;
  }
  Tensor denom = sqrt(second_moment);
  denom /= bias_correction2_sqrt;
  denom += options.eps;
  Tensor update = state.exp_avg / denom;
  update *= options.lr / bias_correction1;
  param -= update;
}

}  // namespace tessera::optim
