#pragma once
// Custom differentiable ops (torch::autograd::Function): a class with two static functions,
//
//   struct Square : autograd::Function<Square> {
//     static Tensor forward(AutogradContext* ctx, const Tensor& x) {
//       ctx->save_for_backward({x});
//       return x * x;
//     }
//     static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
//       Tensor x = ctx->saved()[0];
//       return {grads[0] * x * 2.0};
//     }
//   };
//   Tensor y = Square::apply(x);
//
// forward takes the context, then any arguments; each Tensor argument is an input of the op, and
// backward returns one gradient per Tensor argument, in order (undefined = no gradient). forward
// returns a Tensor or a std::vector<Tensor>, and backward receives one gradient per output
// (zeros for an output that got none, unless set_materialize_grads(false)). forward runs without
// recording; its outputs get a grad_fn when grad mode is on and a Tensor argument requires grad.
// A static `name()` in the class names the node in errors (default: the demangled class name).

#include <any>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tessera/autograd/autograd_meta.h"
#include "tessera/autograd/node.h"
#include "tessera/autograd/saved_tensor.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera::autograd {

class AutogradContext {
 public:
  // Tensors that backward needs; call at most once, in forward.
  void save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }
  // The saved tensors. Errors: after the graph was freed (backward without retain_graph), or when
  // one of them was modified in place after forward.
  std::vector<Tensor> saved() const;
  // Outputs that get no gradient (requires_grad false, zeros in backward's grads).
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  // Whether backward receives zeros (true, the default) or undefined tensors for outputs without a
  // gradient.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }

  // Anything else backward needs (sizes, scalars, flags).
  std::unordered_map<std::string, std::any> saved_data;

 private:
  template <typename T>
  friend class CppNode;
  friend void wrap_outputs(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node,
                           AutogradContext& ctx);

  std::vector<Tensor> to_save_;
  std::vector<SavedTensor> saved_;
  std::unordered_set<const TensorImpl*> non_differentiable_;
  const Node* node_ = nullptr;
  bool materialize_grads_ = true;
};

// Gives the differentiable outputs of node's forward their history and saves ctx's tensors
// (knowing which are outputs). Used by Function::apply.
void wrap_outputs(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node,
                  AutogradContext& ctx);
// Replaces undefined gradients by zeros of their slot's metadata.
void materialize_grads(const Node& node, std::vector<Tensor>& grads);
// Checks the count of gradients backward returned (extras must be undefined) and trims them.
void check_backward_result(const Node& node, std::vector<Tensor>& grads);
std::string demangle(const char* mangled);

// The graph node of a Function: runs T::backward.
template <typename T>
class CppNode final : public Node {
 public:
  CppNode() { ctx_.node_ = this; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override {
    if (ctx_.materialize_grads_) materialize_grads(*this, grad_outputs);
    std::vector<Tensor> grads = T::backward(&ctx_, std::move(grad_outputs));
    check_backward_result(*this, grads);
    return grads;
  }
  std::string name() const override {
    if constexpr (requires { T::name(); }) {
      return std::string(T::name());
    } else {
      return demangle(typeid(T).name());
    }
  }
  void release_variables() override {
    for (SavedTensor& s : ctx_.saved_) s.release();
  }

  AutogradContext ctx_;
};

template <typename Derived>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    std::vector<Tensor> inputs;
    (collect(inputs, args), ...);
    auto node = std::make_shared<CppNode<Derived>>();
    using Out = decltype(Derived::forward(&node->ctx_, std::forward<Args>(args)...));
    static_assert(std::is_same_v<Out, Tensor> || std::is_same_v<Out, std::vector<Tensor>>,
                  "forward must return a Tensor or a std::vector<Tensor>");
    const bool record = is_grad_enabled() && [&] {
      for (const Tensor& t : inputs) {
        if (t.defined() && t.requires_grad()) return true;
      }
      return false;
    }();
    Out out;
    {
      NoGradGuard no_grad;
      out = Derived::forward(&node->ctx_, std::forward<Args>(args)...);
    }
    if (!record) return out;
    node->set_next_edges(collect_next_edges(inputs));
    if constexpr (std::is_same_v<Out, Tensor>) {
      std::vector<Tensor> outputs{std::move(out)};
      wrap_outputs(outputs, node, node->ctx_);
      return outputs[0];
    } else {
      wrap_outputs(out, node, node->ctx_);
      return out;
    }
  }

 private:
  template <typename A>
  static void collect(std::vector<Tensor>& inputs, const A& arg) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) inputs.push_back(arg);
  }
};

}  // namespace tessera::autograd
