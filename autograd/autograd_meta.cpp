#include "tessera/autograd/autograd_meta.h"

#include "tessera/autograd/grad_accumulation.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera::autograd {

AutogradMeta::~AutogradMeta() { release_node(grad_fn_); }

AutogradMeta* get_autograd_meta(const Tensor& t) {
  TensorImpl* impl = t.unsafe_impl();
  if (impl == nullptr) return nullptr;
  return static_cast<AutogradMeta*>(impl->autograd_meta.get());
}

AutogradMeta& materialize_autograd_meta(const Tensor& t) {
  TS_CHECK(t.defined(), "[autograd] operation on an undefined tensor");
  TensorImpl* impl = t.unsafe_impl();
  if (impl->autograd_meta == nullptr) impl->autograd_meta = std::make_shared<AutogradMeta>();
  return static_cast<AutogradMeta&>(*impl->autograd_meta);
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = materialize_autograd_meta(leaf);
  TS_INTERNAL_ASSERT(meta.grad_fn_ == nullptr, "grad_accumulator of a non-leaf");
  std::lock_guard<std::mutex> lock(meta.mutex_);
  // A leaf whose data was replaced in place (Module::to) needs a sink for its new layout.
  const auto stale = [&] {
    const InputMetadata& m = meta.grad_accumulator_->input_metadata()[0];
    return !m.has_shape(leaf.sizes()) || m.dtype() != leaf.dtype() || m.device() != leaf.device();
  };
  if (meta.grad_accumulator_ == nullptr || stale()) {
    meta.grad_accumulator_ = std::make_shared<AccumulateGrad>(leaf);
  }
  return meta.grad_accumulator_;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* meta = get_autograd_meta(t);
  if (meta == nullptr || !meta->requires_grad()) return Edge{};
  if (meta->grad_fn_ != nullptr) {
    meta->grad_fn_->note_consumer();
    return Edge{meta->grad_fn_, meta->output_nr_};
  }
  return Edge{grad_accumulator(t), 0};
}

std::vector<Edge> collect_next_edges(const std::vector<Tensor>& inputs) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  return edges;
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn) {
  AutogradMeta& meta = materialize_autograd_meta(t);
  TS_INTERNAL_ASSERT(meta.grad_fn_ == nullptr && !meta.requires_grad_,
                     "set_history on a tensor that already has autograd history");
  meta.output_nr_ = fn->add_input_metadata(t);
  meta.grad_fn_ = fn;
}

AccumulateGrad::AccumulateGrad(const Tensor& variable) : variable_(variable.impl_ptr()) {
  add_input_metadata(variable);
}

Tensor AccumulateGrad::variable() const {
  std::shared_ptr<TensorImpl> impl = variable_.lock();
  return impl != nullptr ? Tensor(std::move(impl)) : Tensor();
}

void AccumulateGrad::run_pre_hooks(std::vector<Tensor>& grads) const {
  Node::run_pre_hooks(grads);
  const Tensor leaf = variable();
  if (grads[0].defined() && leaf.defined())
    grads[0] = apply_hooks(get_autograd_meta(leaf)->hooks_, std::move(grads[0]));
}

namespace {
// A gradient the engine handed over that nothing else can reach may become .grad() as is;
// anything else is copied so that later in-place accumulation cannot write into a caller's tensor.
bool can_steal(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous();
}
}  // namespace

// Note [Leaf gradient accumulation]
// As PyTorch: the first gradient is stored (stolen when unaliased, else cloned); later ones are
// added in place, except under create_graph (grad mode on), where grad = grad + new out of place
// so that the stored gradient keeps its own graph.
std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor g = std::move(grad_outputs[0]);
  grad_outputs.clear();
  const Tensor leaf = variable();
  if (!g.defined() || !leaf.defined()) return {};
  AutogradMeta& meta = *get_autograd_meta(leaf);
  const bool record = is_grad_enabled();
  std::lock_guard<std::mutex> lock(meta.mutex_);
  if (!meta.grad_.defined()) {
    if (!can_steal(g)) {
      meta.grad_ = copy_gradient(g);
    } else {
      meta.grad_ = record ? std::move(g) : g.detach();
    }
  } else if (record) {
    meta.grad_ = sum_gradients(meta.grad_, g);
  } else {
    meta.grad_ += g;
  }
  return {};
}

}  // namespace tessera::autograd
