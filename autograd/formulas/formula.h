#pragma once
// What every built-in backward formula uses: a Node base named after its op, recording helpers,
// and reducing a broadcast gradient back to its input's shape.
// See Note [Recording ops for autograd] in runtime/autograd_hooks.h for how a formula is reached.
//
// A formula file (autograd/formulas/<family>.cpp) defines, per op,
//
//   class ExpBackward final : public FormulaNode {            // named as PyTorch's grad_fn
//    public:
//     ExpBackward() : FormulaNode("ExpBackward0") {}
//     SavedTensor result;
//     std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
//       return {grads[0] * result.unpack(*this)};               // runtime ops: records again
//     }                                                         // under create_graph
//     void release_variables() override { result.release(); }
//   };
//
// and its slot: run the entry point under NoGradGuard, then
//
//   auto node = std::make_shared<ExpBackward>();
//   record(node, {a}, {&out});                    // edges from inputs, history for outputs
//   node->result = SavedTensor(out, /*is_output=*/true);   // outputs are saved after record
//
// apply receives one gradient per recorded output, an undefined tensor for an output that got
// none (materialize with zeros_like when the formula needs it), and returns one per input in the
// order given to record (undefined: no gradient; the engine skips inputs that need none, and
// casts each gradient to its input's dtype).

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tessera/autograd/autograd_meta.h"
#include "tessera/autograd/node.h"
#include "tessera/autograd/saved_tensor.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/shape.h"
#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

class FormulaNode : public Node {
 public:
  explicit FormulaNode(const char* name) : name_(name) {}
  std::string name() const override { return name_; }
  // Whether input i (in record's order) needs a gradient: a formula skips the work for the
  // others.
  bool needs_input_grad(size_t i) const {
    return i < next_edges().size() && next_edges()[i].is_valid();
  }

 private:
  const char* name_;
};

// Connects node to the graph for outputs = op(inputs): one next edge per input (invalid for an
// undefined input or one that does not require grad), and each floating-point output, in order,
// becomes one of node's gradient slots (outputs of other dtypes, e.g. indices, stay out of the
// graph). Call after the forward ran, with outputs that have no history yet.
// `{a, b}` binds to the first overload, which copies no tensor (ops record on every call).
void record(const std::shared_ptr<Node>& node,
            std::initializer_list<std::reference_wrapper<const Tensor>> inputs,
            std::initializer_list<const Tensor*> outputs);
void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            std::initializer_list<const Tensor*> outputs);
void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs);

// The gradient of a broadcast: grad summed over the dims that broadcasting `shape` to
// grad.sizes() added or expanded, reshaped to `shape`. Records under create_graph.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace tessera::autograd
