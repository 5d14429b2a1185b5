// The autograd methods of Tensor (declared in runtime/tensor.h).

#include "tessera/autograd/autograd.h"
#include "tessera/autograd/autograd_meta.h"
#include "tessera/autograd/grad_accumulation.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera {

using autograd::AutogradMeta;
using autograd::get_autograd_meta;
using autograd::materialize_autograd_meta;

// A DTensor's autograd state is its local tensor's (Note [DTensor autograd] in dtensor/dtensor.h):
// each method below forwards to it, and gradients come back wrapped in the DTensor's layout.
namespace {
Tensor local_of(const Tensor& t) { return distributed_hooks().local(t); }
Tensor as_distributed_grad(const Tensor& local_grad, const Tensor& like) {
  return local_grad.defined() ? distributed_hooks().wrap_like(local_grad, like, true) : Tensor();
}
}  // namespace

bool Tensor::requires_grad() const {
  if (is_distributed()) return local_of(*this).requires_grad();
  const AutogradMeta* meta = get_autograd_meta(*this);
  return meta != nullptr && meta->requires_grad();
}

const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  TS_CHECK(defined(), "[requires_grad_] called on an undefined tensor");
  TS_CHECK(!requires_grad || is_floating_point(dtype()),
           "[requires_grad_] only tensors of floating point dtype can require gradients, got ",
           dtype());
  if (is_distributed()) {
    local_of(*this).requires_grad_(requires_grad);
    return *this;
  }
  AutogradMeta* meta = get_autograd_meta(*this);
  if (meta != nullptr && meta->grad_fn_ != nullptr) {
    TS_CHECK(requires_grad,
             "[requires_grad_] you can only change requires_grad flags of leaf variables. If you "
             "want to use a computed variable in a subgraph that doesn't require differentiation "
             "use var_no_grad = var.detach().");
    return *this;
  }
  if (meta == nullptr && !requires_grad) return *this;
  materialize_autograd_meta(*this).requires_grad_ = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  if (is_distributed()) return as_distributed_grad(local_of(*this).grad(), *this);
  const AutogradMeta* meta = get_autograd_meta(*this);
  return meta != nullptr ? meta->grad_ : Tensor();
}

Tensor& Tensor::mutable_grad() const {
  TS_CHECK(!is_distributed(), "[mutable_grad] a DTensor's gradient is a DTensor built on access; ",
           "use grad() to read it and set_grad() to replace it");
  return materialize_autograd_meta(*this).grad_;
}

void Tensor::set_grad(const Tensor& grad) const {
  if (is_distributed()) {
    local_of(*this).set_grad(
        grad.defined() ? distributed_hooks().grad_local(grad, *this, "set_grad") : Tensor());
    return;
  }
  if (grad.defined()) {
    TS_CHECK_SHAPE(grad.shape() == shape(), "[set_grad] assigned grad has shape ", grad.shape(),
                   " but the tensor has shape ", shape());
    TS_CHECK_DTYPE(grad.dtype() == dtype(), "[set_grad] assigned grad has dtype ", grad.dtype(),
                   " but the tensor has dtype ", dtype());
  }
  materialize_autograd_meta(*this).grad_ = grad;
}

void Tensor::backward(const Tensor& gradient, BackwardOptions options) const {
  TS_CHECK(defined(), "[backward] called on an undefined tensor");
  TS_CHECK(requires_grad(),
           "[backward] the tensor does not require grad and does not have a "
           "grad_fn (call requires_grad_() on the leaves you differentiate)");
  if (is_distributed()) {
    local_of(*this).backward(
        gradient.defined() ? distributed_hooks().grad_local(gradient, *this, "backward") : Tensor(),
        options);
    return;
  }
  autograd::backward({*this}, {gradient}, options);
}

Tensor Tensor::detach() const {
  if (is_distributed()) {
    return distributed_hooks().wrap_like(local_of(*this).detach(), *this, false);
  }
  return make_view(storage(), sizes(), strides(), storage_offset(), dtype());
}

bool Tensor::is_leaf() const {
  if (is_distributed()) return local_of(*this).is_leaf();
  const AutogradMeta* meta = get_autograd_meta(*this);
  return meta == nullptr || meta->grad_fn_ == nullptr;
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> fn) const {
  TS_CHECK(requires_grad(),
           "[register_hook] cannot register a hook on a tensor that doesn't require gradient");
  if (is_distributed()) {
    // The hook sees and returns DTensor gradients; the local tape carries local ones. It keeps
    // the layout through a detached twin: holding this DTensor itself would make a cycle (its
    // local tensor's autograd state owns the hook).
    const Tensor like = distributed_hooks().wrap_like(local_of(*this).detach(), *this, false);
    local_of(*this).register_hook([fn = std::move(fn), like](const Tensor& g) {
      const Tensor r = fn(as_distributed_grad(g, like));
      return r.defined() ? distributed_hooks().grad_local(r, like, "register_hook") : r;
    });
    return;
  }
  AutogradMeta& meta = *get_autograd_meta(*this);
  if (meta.grad_fn_ != nullptr) {
    meta.grad_fn_->add_tensor_pre_hook(meta.output_nr_, std::move(fn));
  } else {
    meta.hooks_.push_back(std::move(fn));
  }
}

void Tensor::retain_grad() const {
  TS_CHECK(requires_grad(),
           "[retain_grad] can't retain_grad on a tensor that has requires_grad=false");
  if (is_distributed()) {
    local_of(*this).retain_grad();
    return;
  }
  AutogradMeta& meta = *get_autograd_meta(*this);
  if (meta.grad_fn_ == nullptr || meta.retains_grad_) return;
  meta.retains_grad_ = true;
  // Weak: the graph must not keep the tensor alive. Accumulates as a leaf would
  // (see Note [Leaf gradient accumulation]).
  std::weak_ptr<AutogradMetaBase> weak = unsafe_impl()->autograd_meta;
  meta.grad_fn_->add_retain_grad_hook(meta.output_nr_, [weak](const Tensor& g) {
    std::shared_ptr<AutogradMetaBase> alive = weak.lock();
    if (alive == nullptr) return;
    auto& m = static_cast<AutogradMeta&>(*alive);
    std::lock_guard<std::mutex> lock(m.mutex_);
    if (!m.grad_.defined()) {
      m.grad_ = autograd::copy_gradient(g);
    } else if (is_grad_enabled()) {
      m.grad_ = autograd::sum_gradients(m.grad_, g);
    } else {
      m.grad_ += g;
    }
  });
}

bool Tensor::retains_grad() const {
  if (is_distributed()) return local_of(*this).retains_grad();
  const AutogradMeta* meta = get_autograd_meta(*this);
  return meta != nullptr && meta->retains_grad_;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (is_distributed()) return local_of(*this).grad_fn();
  const AutogradMeta* meta = get_autograd_meta(*this);
  return meta != nullptr ? meta->grad_fn_ : nullptr;
}

uint32_t Tensor::output_nr() const {
  if (is_distributed()) return local_of(*this).output_nr();
  const AutogradMeta* meta = get_autograd_meta(*this);
  return meta != nullptr ? meta->output_nr_ : 0;
}

}  // namespace tessera
