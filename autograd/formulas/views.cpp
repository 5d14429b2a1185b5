// Backward formulas of the views (ViewGradHooks). A view's gradient is its input's gradient seen
// through the inverse geometry; each formula is itself a view or a recorded op, so that the
// gradients record again under create_graph.
//
// Note [Recording views]
// A slot computes the view under NoGradGuard (so it is exactly the no-grad view: same storage, no
// copy), then gives it its node and marks it is_view_, so that an in-place write through it is
// refused (autograd/formulas/inplace.h) instead of bypassing the base's history. Nodes keep the
// view's arguments and the input's sizes, never the input itself.

#include <memory>
#include <utility>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/view_grad.h"

namespace tessera {

namespace autograd {
namespace {

// See Note [Recording views].
template <typename MakeView>
Tensor recorded_view(const Tensor& self, const MakeView& make_view,
                     std::shared_ptr<FormulaNode> node) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = make_view();
  }
  record(node, {self}, {&out});
  materialize_autograd_meta(out).is_view_ = true;
  return out;
}

// A node whose gradient is one runtime op applied to the incoming gradient.
template <typename Backward>
class ViewNode : public FormulaNode {
 public:
  ViewNode(const char* name, Backward backward)
      : FormulaNode(name), backward_(std::move(backward)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backward_(grads[0])};
  }

 private:
  Backward backward_;
};

template <typename Backward>
std::shared_ptr<FormulaNode> view_node(const char* name, Backward backward) {
  return std::make_shared<ViewNode<Backward>>(name, std::move(backward));
}

// The node of a view that takes one region of its input (slice, select): its gradient is zero
// but in that region, so where another path already gave the input a gradient the engine has the
// region of that one added to (See Note [Gradients of slices added in place] in
// autograd/engine.cpp). `region(t)` is the view of t the forward took.
template <typename Backward, typename Region>
class RegionViewNode final : public ViewNode<Backward> {
 public:
  RegionViewNode(const char* name, Backward backward, Region region)
      : ViewNode<Backward>(name, std::move(backward)), region_(std::move(region)) {}
  bool add_gradient_into(const Tensor& grad, Tensor& sum) override {
    if (grad.dtype() != sum.dtype() || grad.device() != sum.device()) return false;
    Tensor part = region_(sum);
    if (part.sizes() != grad.sizes()) return false;
    part += grad;
    return true;
  }

 private:
  Region region_;
};

template <typename Backward, typename Region>
std::shared_ptr<FormulaNode> region_view_node(const char* name, Backward backward, Region region) {
  return std::make_shared<RegionViewNode<Backward, Region>>(name, std::move(backward),
                                                            std::move(region));
}

// The gradient of a slice / select of a tensor of `sizes`: zeros with grad written into the
// sliced part. Recorded as its own op, whose gradient is the slice again, so that it is twice
// differentiable.
Tensor slice_backward(const Tensor& grad, const Shape& sizes, int64_t dim, int64_t start,
                      int64_t end, int64_t step) {
  Tensor out = zeros(sizes, grad.options());
  {
    NoGradGuard no_grad;
    out.slice(dim, start, end, step).copy_(grad);
  }
  if (any_requires_grad(grad)) {
    record(view_node("SliceBackwardBackward0",
                     [=](const Tensor& g) { return g.slice(dim, start, end, step); }),
           {grad}, {&out});
  }
  return out;
}

Tensor select_backward(const Tensor& grad, const Shape& sizes, int64_t dim, int64_t index) {
  Tensor out = zeros(sizes, grad.options());
  {
    NoGradGuard no_grad;
    out.select(dim, index).copy_(grad);
  }
  if (any_requires_grad(grad)) {
    record(
        view_node("SelectBackwardBackward0", [=](const Tensor& g) { return g.select(dim, index); }),
        {grad}, {&out});
  }
  return out;
}

// Back to the input's shape: the gradient of view / reshape / squeeze.
std::shared_ptr<FormulaNode> reshape_back(const char* name, const Tensor& self) {
  return view_node(name, [sizes = self.sizes()](const Tensor& g) { return g.reshape(sizes); });
}

Tensor view(const Tensor& self, const Shape& sizes) {
  return recorded_view(
      self, [&] { return self.view(sizes); }, reshape_back("ViewBackward0", self));
}

// A reshape that had to copy is not a view: its result may be written in place.
Tensor reshape(const Tensor& self, const Shape& sizes) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.reshape(sizes);
  }
  if (out.is_alias_of(self)) {
    record(reshape_back("ViewBackward0", self), {self}, {&out});
    materialize_autograd_meta(out).is_view_ = true;
  } else {
    record(reshape_back("UnsafeViewBackward0", self), {self}, {&out});
  }
  return out;
}

Tensor transpose(const Tensor& self, int64_t a, int64_t b) {
  return recorded_view(
      self, [&] { return self.transpose(a, b); },
      view_node("TransposeBackward0", [a, b](const Tensor& g) { return g.transpose(a, b); }));
}

// t() of a tensor with fewer than 2 dims is the tensor itself without grad; with grad it is a new
// view, so that the input keeps its own history.
Tensor t(const Tensor& self) {
  return recorded_view(
      self, [&] { return self.dim() < 2 ? self.view(self.sizes()) : self.t(); },
      view_node("TBackward0", [](const Tensor& g) { return g.t(); }));
}

Tensor permute(const Tensor& self, const Shape& dims) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = self.permute(dims);
  }
  Shape inverse(self.dim());
  for (int64_t i = 0; i < self.dim(); ++i) inverse[wrap_dim(dims[i], self.dim(), "permute")] = i;
  record(view_node("PermuteBackward0", [inverse](const Tensor& g) { return g.permute(inverse); }),
         {self}, {&out});
  materialize_autograd_meta(out).is_view_ = true;
  return out;
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  return recorded_view(
      self, [&] { return self.select(dim, index); },
      region_view_node(
          "SelectBackward0",
          [sizes = self.sizes(), dim, index](const Tensor& g) {
            return select_backward(g, sizes, dim, index);
          },
          [dim, index](const Tensor& t) { return t.select(dim, index); }));
}

Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return recorded_view(
      self, [&] { return self.slice(dim, start, end, step); },
      region_view_node(
          "SliceBackward0",
          [sizes = self.sizes(), dim, start, end, step](const Tensor& g) {
            return slice_backward(g, sizes, dim, start, end, step);
          },
          [dim, start, end, step](const Tensor& t) { return t.slice(dim, start, end, step); }));
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  return recorded_view(
      self, [&] { return self.unsqueeze(dim); },
      view_node("UnsqueezeBackward0", [dim](const Tensor& g) { return g.squeeze(dim); }));
}

Tensor squeeze(const Tensor& self) {
  return recorded_view(
      self, [&] { return self.squeeze(); }, reshape_back("SqueezeBackward0", self));
}

Tensor squeeze_dim(const Tensor& self, int64_t dim) {
  return recorded_view(
      self, [&] { return self.squeeze(dim); }, reshape_back("SqueezeBackward1", self));
}

Tensor expand(const Tensor& self, const Shape& sizes) {
  return recorded_view(
      self, [&] { return self.expand(sizes); },
      view_node("ExpandBackward0",
                [shape = self.sizes()](const Tensor& g) { return sum_to(g, shape); }));
}

}  // namespace
}  // namespace autograd

void install_grad_hooks(ViewGradHooks& hooks) {
  hooks.view = &autograd::view;
  hooks.reshape = &autograd::reshape;
  hooks.transpose = &autograd::transpose;
  hooks.t = &autograd::t;
  hooks.permute = &autograd::permute;
  hooks.select = &autograd::select;
  hooks.slice = &autograd::slice;
  hooks.unsqueeze = &autograd::unsqueeze;
  hooks.squeeze = &autograd::squeeze;
  hooks.squeeze_dim = &autograd::squeeze_dim;
  hooks.expand = &autograd::expand;
}

}  // namespace tessera
