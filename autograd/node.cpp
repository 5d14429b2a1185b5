#include "autograd/node.h"

namespace tessera::autograd {

uint32_t Node::add_input_metadata(const Tensor& t) {
  input_metadata_.push_back(InputMetadata{t.shape(), t.dtype(), t.device()});
  return static_cast<uint32_t>(input_metadata_.size() - 1);
}

void Node::add_tensor_pre_hook(uint32_t input_nr, TensorHook hook) {
  pre_hooks_.emplace_back(input_nr, std::move(hook));
}

void Node::add_retain_grad_hook(uint32_t input_nr, std::function<void(const Tensor&)> hook) {
  retain_grad_hooks_.emplace_back(input_nr, std::move(hook));
}

void Node::run_pre_hooks(std::vector<Tensor>& grads) const {
  for (const auto& [input_nr, hook] : pre_hooks_) {
    Tensor& g = grads[input_nr];
    if (!g.defined()) continue;
    Tensor replaced = hook(g);
    if (replaced.defined()) g = std::move(replaced);
  }
  for (const auto& [input_nr, hook] : retain_grad_hooks_) {
    if (grads[input_nr].defined()) hook(grads[input_nr]);
  }
}

Tensor apply_hooks(const std::vector<TensorHook>& hooks, Tensor grad) {
  for (const TensorHook& hook : hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  return grad;
}

}  // namespace tessera::autograd
