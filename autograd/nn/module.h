#pragma once
// nn::Module: the base of layers (torch.nn.Module). A module owns named parameters (leaves that
// require grad), named buffers (state that is not trained, e.g. running statistics) and named
// child modules; names are dotted paths through the children ("0.weight", "fc1.bias").
// Modules are held by std::shared_ptr (children are shared, as in libtorch).
//
// Calling a module: operator()(x) runs the forward pre-hooks (each may replace the input), then
// the virtual forward(x), then the forward hooks (each may replace the output).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/device.h"
#include "tessera/runtime/dtype.h"
#include "tessera/runtime/tensor.h"

namespace tessera::nn {

class Module;

// fn(module, input): a defined result replaces the input of forward.
using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
// fn(module, input, output): a defined result replaces the output of the call.
using ForwardHook =
    std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;

namespace detail {
// The hooks of one module, in registration order (ids increase).
struct HookRegistry {
  uint64_t next_id = 0;
  std::map<uint64_t, ForwardPreHook> pre_hooks;
  std::map<uint64_t, ForwardHook> hooks;
};
}  // namespace detail

// Returned by register_forward_(pre_)hook; remove() unregisters the hook (a no-op when called
// again or after the module died). Dropping the handle keeps the hook, as in PyTorch.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<detail::HookRegistry> registry, uint64_t id, bool pre)
      : registry_(std::move(registry)), id_(id), pre_(pre) {}
  void remove();

 private:
  std::weak_ptr<detail::HookRegistry> registry_;
  uint64_t id_ = 0;
  bool pre_ = false;
};

class Module {
 public:
  // `name` is the type's name, used in error messages ("Linear").
  explicit Module(std::string name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }

  // The computation of the module on one tensor. Concrete modules override it; a module whose
  // forward takes other arguments defines its own and leaves this one raising an Error.
  virtual Tensor forward(const Tensor& input);
  // Pre-hooks, forward, hooks (see the top of this file). Not virtual: hooks always run.
  Tensor operator()(const Tensor& input);

  // ---- registration ----
  // Registers `tensor` as parameter `name`: detached from any graph (a leaf) and marked
  // requires_grad. Returns the registered tensor (keep it: it is the parameter itself). On the
  // name of an existing parameter, replaces it in place: the parameter keeps its identity (as
  // with to()), so handles held elsewhere (the module's own member, an optimizer) see the new
  // tensor; this is how distribute_module swaps a DTensor in.
  // Errors: an empty name, a name with '.', a name already used by a buffer or child;
  // requires_grad on a non-floating tensor.
  Tensor register_parameter(const std::string& name, const Tensor& tensor,
                            bool requires_grad = true);
  // Registers a buffer (moved by to(), not returned by parameters()); an existing buffer's name
  // replaces it in place, as register_parameter. Errors as above.
  Tensor register_buffer(const std::string& name, const Tensor& tensor);
  // Registers a child module. Errors as above, and a null module.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // The tensor forward uses for parameter `name`: the registered one, or the one installed for
  // the current call by override_parameter. Built-in modules read their parameters through it.
  // Errors: no parameter of that name.
  const Tensor& parameter(const std::string& name) const;
  // Makes parameter(name) return `tensor` until restore_parameter(name), leaving the registered
  // parameter as it is: fully_shard installs the unsharded parameter for a forward call this way
  // (PyTorch's FSDP2 swaps the module attribute likewise). Errors: no parameter of that name.
  void override_parameter(const std::string& name, const Tensor& tensor);
  void restore_parameter(const std::string& name);

  // ---- traversal (registration order; children after the module's own entries) ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  // This module (named "") and all descendants, depth-first in registration order, each once
  // (torch.nn.Module.named_modules). The pointers live as long as this module.
  std::vector<std::pair<std::string, Module*>> named_modules();

  // ---- hooks ----
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle register_forward_hook(ForwardHook hook);

  // ---- extensions ----
  // State that other layers attach to a module by key (distribute_module marks the modules it ran
  // on, as PyTorch sets an attribute); null when absent.
  void set_extension(const std::string& key, std::shared_ptr<void> value) {
    extensions_[key] = std::move(value);
  }
  std::shared_ptr<void> extension(const std::string& key) const {
    const auto it = extensions_.find(key);
    return it == extensions_.end() ? nullptr : it->second;
  }

  // ---- mode ----
  // Sets training mode on this module and all descendants (Dropout is the identity in eval).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- moving and clearing ----
  // Moves every parameter, gradient and buffer to `device`. Each parameter keeps its identity (the
  // same Tensor object, still a leaf that requires grad, now viewing the moved data: PyTorch's
  // `param.data = ...`), so tensors held elsewhere (by an optimizer) follow.
  void to(Device device);
  // Casts floating parameters, gradients and buffers to `dtype`, as to(Device).
  // Errors: a non-floating dtype.
  void to(DType dtype);
  // Clears the gradients of all parameters: undefined (set_to_none) or zero-filled.
  void zero_grad(bool set_to_none = true);

 private:
  void check_new_name(const std::string& name, const char* op) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);

  std::string name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::shared_ptr<detail::HookRegistry> hooks_ = std::make_shared<detail::HookRegistry>();
  std::map<std::string, std::shared_ptr<void>> extensions_;
  std::map<std::string, Tensor> overrides_;
};

using ModulePtr = std::shared_ptr<Module>;

}  // namespace tessera::nn
