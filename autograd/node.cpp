#include "autograd/node.h"

#include <algorithm>

namespace tessera::autograd {

InputMetadata::InputMetadata(const Shape& shape, DType dtype, Device device)
    : dtype_(dtype), device_(device) {
  if (shape.size() > kInlineDims) {
    long_shape_ = shape;
    ndim_ = static_cast<uint8_t>(kInlineDims + 1);
    return;
  }
  ndim_ = static_cast<uint8_t>(shape.size());
  std::copy(shape.begin(), shape.end(), inline_sizes_.begin());
}

Shape InputMetadata::shape() const {
  if (ndim_ > kInlineDims) return long_shape_;
  return Shape(inline_sizes_.begin(), inline_sizes_.begin() + ndim_);
}

bool InputMetadata::has_shape(const Shape& shape) const {
  if (ndim_ > kInlineDims) return shape == long_shape_;
  return shape.size() == ndim_ && std::equal(shape.begin(), shape.end(), inline_sizes_.begin());
}

uint32_t Node::add_input_metadata(const Tensor& t) {
  input_metadata_.emplace_back(t.sizes(), t.dtype(), t.device());
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
