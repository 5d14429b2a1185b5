// Backward formulas of the ops that join tensors (ShapeGradHooks): cat and stack. Each input's
// gradient is its part of the output's gradient, taken with a view (narrow / select), so that the
// gradients record again under create_graph.

#include <memory>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/view_grad.h"

namespace tessera {

namespace autograd {
namespace {

class CatBackward final : public FormulaNode {
 public:
  CatBackward(const std::vector<Tensor>& inputs, int64_t dim)
      : FormulaNode("CatBackward0"), dim_(dim) {
    sizes_.reserve(inputs.size());
    for (const Tensor& t : inputs) sizes_.push_back(t.sizes());
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    std::vector<Tensor> out(sizes_.size());
    if (!g.defined()) return out;
    int64_t offset = 0;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      const Shape& s = sizes_[i];
      // See skipped_by_cat in runtime/ops/shape_ops.cpp: such inputs take no part of the output.
      if (s.size() == 1 && s[0] == 0) {
        if (needs_input_grad(i)) out[i] = zeros(s, g.options());
        continue;
      }
      if (needs_input_grad(i)) out[i] = g.narrow(dim_, offset, s[dim_]);
      offset += s[dim_];
    }
    return out;
  }

 private:
  std::vector<Shape> sizes_;
  int64_t dim_;
};

class StackBackward final : public FormulaNode {
 public:
  explicit StackBackward(int64_t dim) : FormulaNode("StackBackward0"), dim_(dim) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    std::vector<Tensor> out(num_outputs());
    if (!g.defined()) return out;
    for (size_t i = 0; i < out.size(); ++i) {
      if (needs_input_grad(i)) out[i] = g.select(dim_, static_cast<int64_t>(i));
    }
    return out;
  }

 private:
  int64_t dim_;
};

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = tessera::cat(tensors, dim);
  }
  // The forward checked dim against the rank of the inputs that take part (the output's); when
  // none does, the backward never reads it.
  const int64_t wrapped = dim < 0 ? dim + out.dim() : dim;
  record(std::make_shared<CatBackward>(tensors, wrapped), tensors, {&out});
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = tessera::stack(tensors, dim);
  }
  record(std::make_shared<StackBackward>(wrap_dim(dim, out.dim(), "stack")), tensors, {&out});
  return out;
}

}  // namespace
}  // namespace autograd

void install_grad_hooks(ShapeGradHooks& hooks) {
  hooks.cat = &autograd::cat;
  hooks.stack = &autograd::stack;
}

}  // namespace tessera
