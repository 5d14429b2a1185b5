// Installs the elementwise family's slots (see Note [Recording ops for autograd]); the formulas
// are in elementwise_unary.cpp, elementwise_binary.cpp and elementwise_inplace.cpp.

#include "tessera/autograd/formulas/elementwise.h"

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"

namespace tessera {

void install_grad_hooks(ElementwiseGradHooks& hooks) {
  hooks.unary = &autograd::unary_with_grad;
  hooks.gelu = &autograd::gelu_with_grad;
  hooks.binary = &autograd::binary_with_grad;
  hooks.binary_scalar = &autograd::binary_scalar_with_grad;
  hooks.add = &autograd::add_with_grad;
  hooks.sub = &autograd::sub_with_grad;
  hooks.where = &autograd::where_with_grad;
  hooks.clamp = &autograd::clamp_with_grad;
  hooks.binary_ = &autograd::binary_inplace_with_grad;
  hooks.binary_scalar_ = &autograd::binary_scalar_inplace_with_grad;
}

namespace autograd {

bool fused_applies(const Tensor& grad, const Tensor& x, const Tensor& y) {
  return !any_requires_grad(grad, x, y) && !any_distributed(grad, x, y);
}

Tensor zero_of(const Tensor& t) { return scalar_tensor(0, t.dtype()); }

Scalar negated(const Scalar& s) {
  if (s.is_floating_point()) return Scalar(-s.to_double());
  return Scalar(-s.to_int64());
}

}  // namespace autograd
}  // namespace tessera
