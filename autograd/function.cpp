#include "tessera/autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "tessera/runtime/ops.h"

namespace tessera::autograd {

std::vector<Tensor> AutogradContext::saved() const {
  std::vector<Tensor> out;
  out.reserve(saved_.size());
  for (const SavedTensor& s : saved_) out.push_back(s.unpack(*node_));
  return out;
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) non_differentiable_.insert(t.unsafe_impl());
}

void wrap_outputs(std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node,
                  AutogradContext& ctx) {
  std::unordered_set<const TensorImpl*> with_history;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    TS_CHECK(out.defined(), "[", node->name(), "] forward returned an undefined tensor as output ",
             i);
    const bool differentiable =
        is_floating_point(out.dtype()) && ctx.non_differentiable_.count(out.unsafe_impl()) == 0;
    // An input returned as is (or any tensor that already has autograd state) must not get this
    // node's history: the output becomes a new tensor sharing its storage.
    if (out.unsafe_impl()->autograd_meta != nullptr) out = out.detach();
    if (differentiable) {
      set_history(out, node);
      with_history.insert(out.unsafe_impl());
    } else {
      node->add_input_metadata(out);
    }
  }
  ctx.saved_.reserve(ctx.to_save_.size());
  for (const Tensor& t : ctx.to_save_) {
    const bool is_output = t.defined() && with_history.count(t.unsafe_impl()) != 0;
    ctx.saved_.emplace_back(t, is_output);
  }
  ctx.to_save_.clear();
}

void materialize_grads(const Node& node, std::vector<Tensor>& grads) {
  const std::vector<InputMetadata>& meta = node.input_metadata();
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      grads[i] =
          zeros(meta[i].shape(), TensorOptions().dtype(meta[i].dtype()).device(meta[i].device()));
    }
  }
}

void check_backward_result(const Node& node, std::vector<Tensor>& grads) {
  const size_t expected = node.num_outputs();
  bool extras_undefined = true;
  for (size_t i = expected; i < grads.size(); ++i) extras_undefined &= !grads[i].defined();
  TS_CHECK(grads.size() >= expected && extras_undefined, "[backward] function ", node.name(),
           " returned an incorrect number of gradients (expected ", expected, ", got ",
           grads.size(), ")");
  grads.resize(expected);
}

std::string demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && name != nullptr ? std::string(name.get()) : std::string(mangled);
}

}  // namespace tessera::autograd
