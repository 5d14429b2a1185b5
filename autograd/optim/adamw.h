#pragma once
// optim::AdamW (torch.optim.AdamW): Adam with decoupled weight decay, in PyTorch's order:
//   step += 1;  p *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
//   with amsgrad: v_max = max(v_max, v), used instead of v below
//   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)

#include <cstdint>
#include <vector>

#include "tessera/autograd/optim/optimizer.h"

namespace tessera::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;

  // Errors: a negative lr, eps or weight_decay; a beta outside [0, 1).
  void validate(const char* op) const;
  template <typename F>
  void for_each_field(F&& f) {
    f("lr", lr);
    f("beta1", beta1);
    f("beta2", beta2);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("amsgrad", amsgrad);
    f("maximize", maximize);
  }
};

struct AdamWState {
  int64_t step = 0;
  Tensor exp_avg;         // m
  Tensor exp_avg_sq;      // v
  Tensor max_exp_avg_sq;  // with amsgrad only

  // The state the first update would create (Note [Optimizer state in checkpoints]).
  void materialize(const Tensor& param, const AdamWOptions& options);
  template <typename F>
  void for_each_field(F&& f) {
    f("step", step);
    f("exp_avg", exp_avg);
    f("exp_avg_sq", exp_avg_sq);
    f("max_exp_avg_sq", max_exp_avg_sq);
  }
};

// One update of `param` in place from `grad` (see Note [Optimizer updates on shards]). Call under
// NoGradGuard when param requires grad.
void adamw_update(Tensor param, const Tensor& grad, AdamWState& state, const AdamWOptions& options);

class AdamW : public GroupedOptimizer<AdamWOptions, AdamWState, adamw_update> {
 public:
  explicit AdamW(const std::vector<Tensor>& params, AdamWOptions options = {})
      : AdamW(std::vector<ParamGroup<AdamWOptions>>{{params, options}}) {}
  explicit AdamW(std::vector<ParamGroup<AdamWOptions>> groups)
      : GroupedOptimizer("AdamW", std::move(groups)) {}
};

}  // namespace tessera::optim
