#include "tessera/autograd/grad_accumulation.h"

#include "tessera/autograd/function.h"
#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/ops.h"

namespace tessera::autograd {

namespace {

struct SumGradients : Function<SumGradients> {
  static const char* name() { return "SumGradients"; }
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& a, const Tensor& b) {
    return tessera::add(a, b);
  }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    return {grads[0], grads[0]};
  }
};

struct CopyGradient : Function<CopyGradient> {
  static const char* name() { return "CopyGradient"; }
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& g) { return g.clone(); }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    return {grads[0]};
  }
};

}  // namespace

// The plain ops when nothing records, to spare the node allocation on every first-order backward.
Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  return any_requires_grad(a, b) ? SumGradients::apply(a, b) : tessera::add(a, b);
}

bool accumulates_in_place(const Tensor& sum) {
  const bool unshared = sum.impl_ptr().use_count() == 1 && sum.storage().use_count() == 1;
  return !is_grad_enabled() && unshared && !sum.requires_grad() && sum.is_contiguous();
}

void accumulate_gradient(Tensor& sum, const Tensor& g) {
  if (accumulates_in_place(sum) && sum.sizes() == g.sizes() && sum.dtype() == g.dtype() &&
      sum.device() == g.device()) {
    sum += g;
    return;
  }
  sum = sum_gradients(sum, g);
}

Tensor copy_gradient(const Tensor& g) {
  return any_requires_grad(g) ? CopyGradient::apply(g) : g.clone();
}

}  // namespace tessera::autograd
