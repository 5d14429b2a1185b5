#include "tessera/autograd/nn/parameter_utils.h"

#include "tessera/runtime/distributed.h"
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
    // A DTensor gradient's norm is reduced over its mesh and read as a plain value (the same on
    // every rank of that mesh), so that norms from several meshes and plain gradients combine; in
    // float64 on the first gradient's device, so that dtypes and devices combine too.
    Tensor n = norm(grad, norm_type);
    if (n.is_distributed()) n = n.full_tensor();
    norms.push_back(n.to(kFloat64).to(grads.front().device()));
  }
  if (grads.empty()) return zeros({}, kFloat64);
  const Tensor total = norm(stack(norms), norm_type);
  // Kept as a tensor (no host read), as PyTorch, so that a device gradient is not synchronized.
  const Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  for (Tensor grad : grads) {
    // A DTensor's shard (Shard, Replicate or Partial alike) scales as the whole does.
    Tensor target = grad.is_distributed() ? distributed_hooks().local(grad) : grad;
    target *= coef.to(target.device());
  }
  return total;
}

}  // namespace tessera::nn
