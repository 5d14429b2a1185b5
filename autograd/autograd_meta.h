#pragma once
// What autograd keeps on a tensor (TensorImpl::autograd_meta) and the helpers that connect tensors
// to the graph.

#include <memory>
#include <mutex>
#include <vector>

#include "tessera/autograd/node.h"
#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

struct AutogradMeta final : AutogradMetaBase {
  // Set by requires_grad_ on a leaf; non-leaves require grad through their grad_fn.
  bool requires_grad_ = false;
  Tensor grad_;
  // The node that receives this tensor's gradient (null for leaves), in slot output_nr_.
  std::shared_ptr<Node> grad_fn_;
  uint32_t output_nr_ = 0;
  // A leaf's AccumulateGrad node, created on first use and kept while the leaf lives (it refers
  // back to the leaf weakly, so there is no cycle): recording an op on a leaf then costs no
  // allocation for it, which matters for the tiny ops of a training loop.
  std::shared_ptr<Node> grad_accumulator_;
  // Hooks of a leaf (non-leaf hooks live on grad_fn_, see Node::add_tensor_pre_hook).
  std::vector<TensorHook> hooks_;
  bool retains_grad_ = false;
  // Set on a view made from a tensor that requires grad (autograd/formulas/views.cpp), so that an
  // in-place write through the view cannot silently bypass its base's history.
  bool is_view_ = false;
  // Guards grad_accumulator_ creation and grad_ accumulation.
  std::mutex mutex_;

  // Releases grad_fn_ through release_node (see Note [Releasing deep graphs]).
  ~AutogradMeta() override;

  bool requires_grad() const override { return requires_grad_ || grad_fn_ != nullptr; }
};

// The tensor's AutogradMeta, or null when it has none.
AutogradMeta* get_autograd_meta(const Tensor& t);
// The tensor's AutogradMeta, created if needed.
AutogradMeta& materialize_autograd_meta(const Tensor& t);

// The AccumulateGrad node of a leaf that requires grad (created on first call).
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
// Where t's gradient goes: its grad_fn slot, or its leaf accumulator; invalid when t is undefined
// or does not require grad.
Edge gradient_edge(const Tensor& t);
std::vector<Edge> collect_next_edges(const std::vector<Tensor>& inputs);
// Makes t (which must have no autograd history) the next output of fn: declares fn's input slot
// for it and sets its grad_fn and output_nr.
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn);

// Sink of a leaf's gradient: adds it into leaf.grad(), after the leaf's hooks ran as this node's
// pre-hooks (so that autograd::grad, which captures it without running the node, sees them too).
// Refers to the leaf weakly (the leaf owns it): a gradient for a leaf nobody holds any more is
// dropped, since no one can read it.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& variable);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  void run_pre_hooks(std::vector<Tensor>& grads) const override;
  // The leaf, or an undefined tensor once it is gone.
  Tensor variable() const;

 private:
  std::weak_ptr<TensorImpl> variable_;
};

}  // namespace tessera::autograd
