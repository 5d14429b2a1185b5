#pragma once
// The seam through which op entry points record the autograd graph without runtime/ depending on
// autograd/ (DESIGN.md layers).
//
// Note [Recording ops for autograd]
// An op entry point in runtime/ops/ computes its outputs first, then, only when
// any_requires_grad(inputs...) holds, calls its family's slot of autograd_hooks() with the same
// arguments it gave the kernel. autograd/ fills the slots (detail::install_autograd_hooks, one
// explicit registration function, mirroring KernelTable); a slot creates the op's backward Node,
// saves what the formula needs and sets the outputs' grad_fn. Adding a family's formulas adds
// its slot here, its recorder under autograd/formulas/ and one call per entry point.

#include <vector>

#include "runtime/grad_mode.h"
#include "runtime/op_table.h"
#include "runtime/tensor.h"

namespace tessera {

struct AutogradHooks {
  // Record out = op(in) and out = op(a, b); the arguments are those of KernelTable::unary/binary.
  void (*unary)(UnaryOp op, const Tensor& out, const Tensor& in) = nullptr;
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
};

// The table autograd/ filled (once, on first use).
const AutogradHooks& autograd_hooks();

namespace detail {
// Defined in autograd/register.cpp.
void install_autograd_hooks(AutogradHooks& table);

inline bool requires_grad_fast(const Tensor& t) {
  const TensorImpl* impl = t.unsafe_impl();
  return impl != nullptr && impl->autograd_meta != nullptr && impl->autograd_meta->requires_grad();
}
inline bool requires_grad_fast(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (requires_grad_fast(t)) return true;
  }
  return false;
}
}  // namespace detail

// Whether an op on these inputs (Tensors or vectors of Tensors; undefined ones allowed) must
// record: grad mode is on and some input requires grad. Cheap enough for every op call.
template <typename... Inputs>
bool any_requires_grad(const Inputs&... inputs) {
  return is_grad_enabled() && (detail::requires_grad_fast(inputs) || ...);
}

}  // namespace tessera
