#include "tessera/autograd/saved_tensor.h"

#include "tessera/autograd/autograd_meta.h"

namespace tessera::autograd {

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : was_defined_(t.defined()) {
  if (!was_defined_) return;
  saved_version_ = t.storage()->version();
  AutogradMeta* meta = get_autograd_meta(t);
  is_output_ = is_output && meta != nullptr && meta->grad_fn_ != nullptr;
  if (is_output_) {
    data_ = t.detach();
    weak_grad_fn_ = meta->grad_fn_;
    output_nr_ = meta->output_nr_;
  } else {
    data_ = t;
  }
}

Tensor SavedTensor::unpack(const Node& saved_for) const {
  if (!was_defined_) return Tensor();
  TS_CHECK(
      !released_,
      "[backward] Trying to backward through the graph a second time (or directly access saved "
      "tensors after they have already been freed). Saved intermediate values of the graph "
      "are freed when you call backward() or autograd::grad(). Specify retain_graph=true if "
      "you need to backward through the graph a second time or if you need to access saved "
      "tensors after calling backward.");
  const uint64_t now = data_.storage()->version();
  TS_CHECK(now == saved_version_,
           "[backward] one of the tensors needed for gradient computation by ", saved_for.name(),
           " has been modified by an inplace operation: saved at version ", saved_version_,
           ", now at version ", now,
           ". Modify a clone instead, or compute the gradient before the in-place write.");
  if (!is_output_) return data_;
  // Rebuild the output with its history, so that a create_graph backward can differentiate
  // through it.
  Tensor out = data_.detach();
  if (std::shared_ptr<Node> fn = weak_grad_fn_.lock()) {
    AutogradMeta& meta = materialize_autograd_meta(out);
    meta.grad_fn_ = std::move(fn);
    meta.output_nr_ = output_nr_;
  }
  return out;
}

void SavedTensor::release() {
  data_ = Tensor();
  weak_grad_fn_.reset();
  released_ = true;
}

}  // namespace tessera::autograd
