#include "tessera/autograd/nn/parameter_utils.h"

#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::nn {

void zero_grad(const std::vector<Tensor>& parameters, bool set_to_none) {
  NoGradGuard no_grad;
  for (const Tensor& param : parameters) {
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      param.set_grad(Tensor());
      continue;
    }
    grad = grad.detach();
    grad.zero_();
    param.set_grad(grad);
  }
}

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type) {
  TS_CHECK(max_norm >= 0.0, "[clip_grad_norm_] max_norm must be >= 0, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  std::vector<Tensor> norms;
  for (const Tensor& param : parameters) {
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    grads.push_back(grad);
    // In float64 on the first gradient's device, so that gradients of different dtypes and
    // devices combine.
    norms.push_back(norm(grad, norm_type).to(kFloat64).to(grads.front().device()));
  }
  if (grads.empty()) return zeros({}, kFloat64);
  const Tensor total = norm(stack(norms), norm_type);
  // Kept as a tensor (no host read), as PyTorch, so that a device gradient is not synchronized.
  const Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  // With DTensor gradients the total is a (replicated) DTensor: a plain gradient beside them,
  // a parameter no plan sharded, is scaled by its value on this rank.
  const Tensor plain_coef = coef.is_distributed() ? coef.full_tensor() : coef;
  for (Tensor grad : grads) grad *= (grad.is_distributed() ? coef : plain_coef).to(grad.device());
  return total;
}

}  // namespace tessera::nn
