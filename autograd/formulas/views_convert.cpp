// Backward formulas of the conversions and copies (ConvertGradHooks): to(DType), to(Device),
// clone, and the in-place copy_ and fill_.

#include <memory>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/autograd/formulas/inplace.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/view_grad.h"

namespace tessera {

namespace autograd {
namespace {

// The input's gradient is the output's, converted back to the input's dtype and device.
class ToCopyBackward final : public FormulaNode {
 public:
  ToCopyBackward(DType dtype, Device device)
      : FormulaNode("ToCopyBackward0"), dtype_(dtype), device_(device) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {grads[0].to(dtype_).to(device_)};
  }

 private:
  DType dtype_;
  Device device_;
};

class CloneBackward final : public FormulaNode {
 public:
  CloneBackward() : FormulaNode("CloneBackward0") {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {grads[0]}; }
};

// self.copy_(src): the new value is src broadcast and cast to self, so src gets the gradient
// reduced back to its shape; self's old value is overwritten and gets zeros (as PyTorch).
class CopyBackwards final : public FormulaNode {
 public:
  explicit CopyBackwards(const Tensor& src)
      : FormulaNode("CopyBackwards"), src_sizes_(src.sizes()), src_device_(src.device()) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    return {needs_input_grad(0) ? zeros_like(g) : Tensor(),
            needs_input_grad(1) ? sum_to(g, src_sizes_).to(src_device_) : Tensor()};
  }

 private:
  Shape src_sizes_;
  Device src_device_;
};

// self.fill_(value): the new value is a constant; self's old value gets zeros (as PyTorch).
class FillBackward final : public FormulaNode {
 public:
  FillBackward() : FormulaNode("FillBackward0") {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {zeros_like(grads[0])};
  }
};

// Makes self, just written in place, the output of node (whose edges were collected from self's
// old history before): later uses of self differentiate through node.
void rebase_history(const Tensor& self, const std::shared_ptr<Node>& node) {
  AutogradMeta& meta = materialize_autograd_meta(self);
  meta.output_nr_ = node->add_input_metadata(self);
  meta.grad_fn_ = node;
}

Tensor to_dtype(const Tensor& self, DType dtype) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.to(dtype);
  }
  record(std::make_shared<ToCopyBackward>(self.dtype(), self.device()), {self}, {&out});
  return out;
}

Tensor to_device(const Tensor& self, Device device) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.to(device);
  }
  record(std::make_shared<ToCopyBackward>(self.dtype(), self.device()), {self}, {&out});
  return out;
}

Tensor clone(const Tensor& self) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.clone();
  }
  record(std::make_shared<CloneBackward>(), {self}, {&out});
  return out;
}

Tensor& copy_(Tensor& self, const Tensor& src) {
  check_inplace(self, "copy_");
  std::vector<Edge> edges = collect_next_edges({self, src});
  {
    NoGradGuard no_grad;
    self.copy_(src);
  }
  if (!is_floating_point(self.dtype())) return self;
  auto node = std::make_shared<CopyBackwards>(src);
  node->set_next_edges(std::move(edges));
  rebase_history(self, node);
  return self;
}

Tensor& fill_(Tensor& self, const Scalar& value) {
  check_inplace(self, "fill_");
  std::vector<Edge> edges = collect_next_edges({self});
  {
    NoGradGuard no_grad;
    self.fill_(value);
  }
  auto node = std::make_shared<FillBackward>();
  node->set_next_edges(std::move(edges));
  rebase_history(self, node);
  return self;
}

}  // namespace
}  // namespace autograd

void install_grad_hooks(ConvertGradHooks& hooks) {
  hooks.to_dtype = &autograd::to_dtype;
  hooks.to_device = &autograd::to_device;
  hooks.clone = &autograd::clone;
  hooks.copy_ = &autograd::copy_;
  hooks.fill_ = &autograd::fill_;
}

}  // namespace tessera
