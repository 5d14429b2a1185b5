#include "tessera/autograd/node.h"

#include <algorithm>
#include <new>

namespace tessera::autograd {

InputMetadata::InputMetadata(const Shape& shape, DType dtype, Device device)
    : dtype_(dtype), device_(device) {
  if (shape.size() > kInlineDims) {
    long_shape_ = shape;
    ndim_ = static_cast<uint8_t>(kInlineDims + 1);
    return;
  }
  ndim_ = static_cast<uint8_t>(shape.size());
  std::copy(shape.begin(), shape.end(), inline_sizes_.begin());
}

Shape InputMetadata::shape() const {
  if (ndim_ > kInlineDims) return long_shape_;
  return Shape(inline_sizes_.begin(), inline_sizes_.begin() + ndim_);
}

bool InputMetadata::has_shape(const Shape& shape) const {
  if (ndim_ > kInlineDims) return shape == long_shape_;
  return shape.size() == ndim_ && std::equal(shape.begin(), shape.end(), inline_sizes_.begin());
}

// Note [Releasing deep graphs]
// A graph is a chain of shared_ptrs: tensor -> AutogradMeta::grad_fn_ -> Node -> next edge ->
// Node -> ..., and a saved input (SavedTensor) is a second path, Node -> TensorImpl ->
// AutogradMeta -> the grad_fn of that input. Dropping the last tensor of a chain of N ops with
// plain destructors nests ~Node N deep, 48 bytes of stack a level for y = y * c at -O2 (more
// under ASan): about 175,000 such ops overflow an 8 MiB main-thread stack (issue 21).
//
// As PyTorch's deleteNode, a node's destructor does not free its children itself: release_node
// moves every reference that would be the last one onto a stack, and the outermost release on the
// thread pops and frees it in a loop; a destructor running inside that loop only pushes onto it.
// Both owners of a path go through it, ~Node's edges and ~AutogradMeta's grad_fn_, so a node held
// last through a saved tensor (or a hook capturing a tensor, or saved_data) is deferred too, and
// destructors nest a bounded number of levels whatever the graph's shape. A node that has another
// owner (use_count > 1) is only unreferenced. The stack lives in the outermost release's frame;
// the thread_local is a plain pointer so that it stays usable from other thread_local
// destructors at thread exit.
namespace {
thread_local std::vector<std::shared_ptr<Node>>* t_pending_releases = nullptr;
}  // namespace

void release_node(std::shared_ptr<Node>& fn) noexcept {
  if (fn == nullptr) return;
  if (fn.use_count() != 1) {
    fn.reset();
    return;
  }
  if (t_pending_releases != nullptr) {
    try {
      t_pending_releases->push_back(std::move(fn));
    } catch (const std::bad_alloc&) {
      fn.reset();  // out of memory for the stack: free it recursively rather than leak
    }
    return;
  }
  std::vector<std::shared_ptr<Node>> pending;
  t_pending_releases = &pending;
  fn.reset();
  while (!pending.empty()) {
    std::shared_ptr<Node> next = std::move(pending.back());
    pending.pop_back();
    next.reset();  // its destructor may push onto pending
  }
  t_pending_releases = nullptr;
}

Node::~Node() {
  for (Edge& e : next_edges_) release_node(e.function);
}

uint32_t Node::add_input_metadata(const Tensor& t) {
  input_metadata_.emplace_back(t.sizes(), t.dtype(), t.device());
  return static_cast<uint32_t>(input_metadata_.size() - 1);
}

void Node::add_tensor_pre_hook(uint32_t input_nr, TensorHook hook) {
  pre_hooks_.emplace_back(input_nr, std::move(hook));
}

void Node::add_retain_grad_hook(uint32_t input_nr, std::function<void(const Tensor&)> hook) {
  retain_grad_hooks_.emplace_back(input_nr, std::move(hook));
}

void Node::run_pre_hooks(std::vector<Tensor>& grads) const {
  for (const auto& [input_nr, hook] : pre_hooks_) {
    Tensor& g = grads[input_nr];
    if (!g.defined()) continue;
    Tensor replaced = hook(g);
    if (replaced.defined()) g = std::move(replaced);
  }
  for (const auto& [input_nr, hook] : retain_grad_hooks_) {
    if (grads[input_nr].defined()) hook(grads[input_nr]);
  }
}

Tensor apply_hooks(const std::vector<TensorHook>& hooks, Tensor grad) {
  for (const TensorHook& hook : hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  return grad;
}

}  // namespace tessera::autograd
