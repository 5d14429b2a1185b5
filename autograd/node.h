#pragma once
// The backward graph: a Node per recorded op computes the gradients of its forward inputs from the
// gradients of its forward outputs. Edges point from a node to the nodes of its inputs.
// See autograd/README.md for the picture.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

class Node;

// Where one gradient goes: input slot `input_nr` of `function`. Invalid (null function) for a
// forward input that does not require grad.
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;

  bool is_valid() const { return function != nullptr; }
};

// What a node expects of the gradient in one input slot (that of one forward output). Every
// recorded op stores one per output, so sizes of up to kInlineDims dims are kept inline rather
// than in a heap-allocated Shape.
class InputMetadata {
 public:
  static constexpr size_t kInlineDims = 6;
  InputMetadata(const Shape& shape, DType dtype, Device device);
  Shape shape() const;
  bool has_shape(const Shape& shape) const;
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

 private:
  std::array<int64_t, kInlineDims> inline_sizes_{};
  Shape long_shape_;  // only for more than kInlineDims dims
  uint8_t ndim_ = 0;
  DType dtype_ = kFloat32;
  Device device_ = Device::cpu();
};

using TensorHook = std::function<Tensor(const Tensor&)>;

class Node {
 public:
  Node() = default;
  // Releases the next edges through release_node, so that freeing a graph of any depth never
  // nests destructors more than a few deep (see Note [Releasing deep graphs]).
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the forward inputs (one per next edge; undefined = none) from the gradients of the
  // forward outputs (one per input slot). Called by the engine only.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  // For error messages and introspection, e.g. "AccumulateGrad".
  virtual std::string name() const = 0;
  // Frees saved tensors once a backward without retain_graph has run this node.
  virtual void release_variables() {}
  // The in-place form of apply for a node of one input slot and one next edge whose gradient is
  // zero but in one region of its input (slice, select): adds grad_output into that region of
  // `sum`, the gradient another path already gave the input, and returns true; false (the
  // default) leaves sum alone. The engine calls it only where it could add into sum in place
  // (See Note [Gradients of slices added in place] in autograd/engine.cpp).
  virtual bool add_gradient_into(const Tensor& /*grad_output*/, Tensor& /*sum*/) { return false; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  size_t num_outputs() const { return next_edges_.size(); }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }

  // Declares the next input slot (in order) with t's shape, dtype and device; returns its index.
  uint32_t add_input_metadata(const Tensor& t);
  const std::vector<InputMetadata>& input_metadata() const { return input_metadata_; }
  size_t num_inputs() const { return input_metadata_.size(); }

  // Hooks of the non-leaf tensor in slot input_nr (Tensor::register_hook, Tensor::retain_grad). The
  // engine runs them on the slot's summed gradient before apply: registered hooks in order, then
  // the retain_grad hooks, which only observe.
  void add_tensor_pre_hook(uint32_t input_nr, TensorHook hook);
  void add_retain_grad_hook(uint32_t input_nr, std::function<void(const Tensor&)> hook);
  // Virtual: a leaf's AccumulateGrad runs the hooks kept on the leaf itself.
  virtual void run_pre_hooks(std::vector<Tensor>& grads) const;
  bool has_pre_hooks() const { return !pre_hooks_.empty() || !retain_grad_hooks_.empty(); }

  // How many edges to this node were made (gradient_edge of one of its outputs): an upper bound
  // on the gradients its input slots sum, which lets a node know that every one of them came
  // through consumers it knows (Note [Partial gradients into a redistribute] in
  // dtensor/dtensor_functions.cpp).
  void note_consumer() { ++consumers_; }
  uint32_t consumers() const { return consumers_; }

 private:
  uint32_t consumers_ = 0;
  std::vector<Edge> next_edges_;
  std::vector<InputMetadata> input_metadata_;
  std::vector<std::pair<uint32_t, TensorHook>> pre_hooks_;
  std::vector<std::pair<uint32_t, std::function<void(const Tensor&)>>> retain_grad_hooks_;
};

// Drops the reference `fn` (leaving it null). If that frees the node, the nodes it held alone are
// freed by a loop on this thread rather than by nested destructors, so that a graph of any depth
// is released in bounded stack (see Note [Releasing deep graphs]). For every owner of a
// shared_ptr<Node> that may be the last one on a long path: Node's edges, AutogradMeta's grad_fn.
void release_node(std::shared_ptr<Node>& fn) noexcept;

// Applies hooks in order to grad; a hook returning an undefined tensor keeps the gradient.
Tensor apply_hooks(const std::vector<TensorHook>& hooks, Tensor grad);

}  // namespace tessera::autograd
