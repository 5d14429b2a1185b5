#pragma once
// The seam through which op entry points record the autograd graph without runtime/ depending on
// autograd/ (DESIGN.md layers).
//
// Note [Recording ops for autograd]
// Each op family has a table of function pointers, one slot per differentiable entry point with
// that entry point's signature, declared next to the family in runtime/ops/<family>_grad.h:
//
//   struct ElementwiseGradHooks { Tensor (*unary)(UnaryOp op, const Tensor& a) = nullptr; ... };
//   void install_grad_hooks(ElementwiseGradHooks& hooks);   // defined in autograd/formulas/
//
// An entry point starts with
//
//   if (any_requires_grad(a)) return grad_hooks<ElementwiseGradHooks>().unary(op, a);
//
// and the slot (autograd/formulas/<family>.cpp) runs the same entry point again under
// NoGradGuard (so nothing inside it records: no nodes for the internal expand / to / view calls),
// then creates the op's backward Node, saves what the formula needs and gives the outputs their
// history (autograd/formulas/formula.h). Backward formulas are written with runtime ops, so that
// they record again under create_graph. Composite entry points made only of other public ops
// need no slot: their parts record.

#include <vector>

#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

// The table of one op family, filled once (on first use) by the install_grad_hooks overload for
// its type, which autograd/ defines; found by argument-dependent lookup.
template <typename Hooks>
const Hooks& grad_hooks() {
  static const Hooks table = [] {
    Hooks hooks;
    install_grad_hooks(hooks);
    return hooks;
  }();
  return table;
}

namespace detail {
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
