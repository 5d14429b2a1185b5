#include "tessera/autograd/nn/module.h"

#include <functional>
#include <unordered_set>

#include "tessera/autograd/nn/parameter_utils.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera::nn {
namespace {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using OwnEntries = std::function<NamedTensors(const Module&)>;

// Depth-first: a module's own entries, then each child's under "<child name>.". A tensor reached
// twice (a shared child, tied weights) is listed once, under its first name, as PyTorch does.
void collect(const Module& module, const std::string& prefix, const OwnEntries& own,
             std::unordered_set<const TensorImpl*>& seen, NamedTensors& out) {
  for (auto& [name, tensor] : own(module)) {
    if (!seen.insert(tensor.unsafe_impl()).second) continue;
    out.emplace_back(prefix + name, tensor);
  }
  for (const auto& [name, child] : module.named_children()) {
    collect(*child, prefix + name + ".", own, seen, out);
  }
}

NamedTensors collect_all(const Module& module, const OwnEntries& own) {
  std::unordered_set<const TensorImpl*> seen;
  NamedTensors out;
  collect(module, "", own, seen, out);
  return out;
}

std::vector<Tensor> values(const NamedTensors& named) {
  std::vector<Tensor> out;
  out.reserve(named.size());
  for (const auto& entry : named) out.push_back(entry.second);
  return out;
}

// PyTorch's `tensor.data = data`: `tensor` (every copy of it, since copies share the TensorImpl)
// now views data's storage with data's geometry and dtype, and keeps its autograd state. This is
// how to() moves a parameter without changing which tensor is the parameter.
void set_data(const Tensor& tensor, const Tensor& data) {
  TensorImpl& impl = *tensor.unsafe_impl();
  const TensorImpl& from = *data.unsafe_impl();
  impl.storage = from.storage;
  impl.sizes = from.sizes;
  impl.strides = from.strides;
  impl.offset = from.offset;
  impl.dtype = from.dtype;
  impl.contiguous = from.contiguous;
}

// Replaces the data of every parameter (with its gradient) and buffer of `module` by
// convert(data), skipping those for which convert returns the same tensor.
void convert_tensors(Module& module, const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  for (const Tensor& param : module.parameters()) {
    const Tensor grad = param.grad();
    const Tensor data = convert(param.detach());
    if (data.is_alias_of(param)) continue;
    set_data(param, data);
    if (grad.defined()) param.set_grad(convert(grad));
  }
  for (const Tensor& buffer : module.buffers()) {
    const Tensor data = convert(buffer.detach());
    if (!data.is_alias_of(buffer)) set_data(buffer, data);
  }
}

}  // namespace

void RemovableHandle::remove() {
  std::shared_ptr<detail::HookRegistry> registry = registry_.lock();
  if (registry == nullptr) return;
  if (pre_) {
    registry->pre_hooks.erase(id_);
  } else {
    registry->hooks.erase(id_);
  }
}

Module::Module(std::string name) : name_(std::move(name)) {}

Tensor Module::forward(const Tensor& /*input*/) {
  throw NotSupportedError(tessera::detail::concat_message(
      "[", name_, "::forward] this module has no forward(const Tensor&): call its own forward"));
}

Tensor Module::operator()(const Tensor& input) {
  Tensor x = input;
  if (!hooks_->pre_hooks.empty()) {
    // A copy, so that a hook may remove itself (or others) while the hooks run.
    const auto pre_hooks = hooks_->pre_hooks;
    for (const auto& entry : pre_hooks) {
      Tensor replaced = entry.second(*this, x);
      if (replaced.defined()) x = std::move(replaced);
    }
  }
  Tensor output = forward(x);
  if (!hooks_->hooks.empty()) {
    const auto hooks = hooks_->hooks;
    for (const auto& entry : hooks) {
      Tensor replaced = entry.second(*this, x, output);
      if (replaced.defined()) output = std::move(replaced);
    }
  }
  return output;
}

void Module::check_new_name(const std::string& name, const char* op) const {
  TS_CHECK(!name.empty(), "[", name_, "::", op, "] the name must not be empty");
  TS_CHECK(name.find('.') == std::string::npos, "[", name_, "::", op, "] name \"", name,
           "\" must not contain '.' (dots separate the names of nested modules)");
  auto taken = [&](const auto& entries) {
    for (const auto& entry : entries) {
      if (entry.first == name) return true;
    }
    return false;
  };
  TS_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), "[", name_, "::", op,
           "] name \"", name, "\" is already used by a parameter, buffer or child module");
}

namespace {

// The entry named `name`, or null.
Tensor* find_entry(std::vector<std::pair<std::string, Tensor>>& entries, const std::string& name) {
  for (auto& entry : entries) {
    if (entry.first == name) return &entry.second;
  }
  return nullptr;
}

// Makes `existing` the tensor `value` is (data, geometry, autograd state, distribution) in place,
// so that every handle of it (a module's member, an optimizer's list) sees the new value: how a
// partition function swaps a DTensor in for a parameter.
void replace_in_place(const Tensor& existing, const Tensor& value) {
  if (existing.unsafe_impl() == value.unsafe_impl()) return;
  *existing.unsafe_impl() = *value.unsafe_impl();
}

}  // namespace

Tensor Module::register_parameter(const std::string& name, const Tensor& tensor,
                                  bool requires_grad) {
  Tensor* existing = find_entry(parameters_, name);
  if (existing == nullptr) check_new_name(name, "register_parameter");
  TS_CHECK(tensor.defined(), "[", name_, "::register_parameter] parameter \"", name,
           "\" is an undefined tensor");
  // A parameter is a leaf: cut it from the graph that computed it (e.g. an initializer's ops).
  Tensor param = tensor.is_leaf() ? tensor : tensor.detach();
  param.requires_grad_(requires_grad);
  if (existing != nullptr) {
    replace_in_place(*existing, param);
    return *existing;
  }
  parameters_.emplace_back(name, param);
  return param;
}

const Tensor& Module::parameter(const std::string& name) const {
  if (!overrides_.empty()) {
    const auto it = overrides_.find(name);
    if (it != overrides_.end()) return it->second;
  }
  for (const auto& entry : parameters_) {
    if (entry.first == name) return entry.second;
  }
  TS_CHECK(false, "[", name_, "::parameter] no parameter named \"", name, "\"");
  return parameters_.front().second;  // not reached
}

void Module::override_parameter(const std::string& name, const Tensor& tensor) {
  (void)parameter(name);  // checks the name
  overrides_[name] = tensor;
}

void Module::restore_parameter(const std::string& name) { overrides_.erase(name); }

Tensor Module::register_buffer(const std::string& name, const Tensor& tensor) {
  Tensor* existing = find_entry(buffers_, name);
  if (existing == nullptr) check_new_name(name, "register_buffer");
  TS_CHECK(tensor.defined(), "[", name_, "::register_buffer] buffer \"", name,
           "\" is an undefined tensor");
  if (existing != nullptr) {
    replace_in_place(*existing, tensor);
    return *existing;
  }
  buffers_.emplace_back(name, tensor);
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  TS_CHECK(module != nullptr, "[", name_, "::register_module] child \"", name, "\" is null");
  TS_CHECK(module.get() != this, "[", name_, "::register_module] a module cannot be its own child");
  children_.emplace_back(name, std::move(module));
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  if (!recurse) return parameters_;
  return collect_all(*this, [](const Module& m) { return m.named_parameters(false); });
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return values(named_parameters(recurse));
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  if (!recurse) return buffers_;
  return collect_all(*this, [](const Module& m) { return m.named_buffers(false); });
}

std::vector<Tensor> Module::buffers(bool recurse) const { return values(named_buffers(recurse)); }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  out.reserve(children_.size());
  for (const auto& entry : children_) out.push_back(entry.second);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> seen;
  std::function<void(Module&, const std::string&)> visit = [&](Module& module,
                                                               const std::string& path) {
    if (!seen.insert(&module).second) return;
    out.emplace_back(path, &module);
    for (const auto& [name, child] : module.named_children()) {
      visit(*child, path.empty() ? name : path + "." + name);
    }
  };
  visit(*this, "");
  return out;
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  const uint64_t id = hooks_->next_id++;
  hooks_->pre_hooks.emplace(id, std::move(hook));
  return RemovableHandle(hooks_, id, /*pre=*/true);
}

RemovableHandle Module::register_forward_hook(ForwardHook hook) {
  const uint64_t id = hooks_->next_id++;
  hooks_->hooks.emplace(id, std::move(hook));
  return RemovableHandle(hooks_, id, /*pre=*/false);
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& entry : children_) entry.second->train(on);
}

void Module::to(Device device) {
  convert_tensors(*this, [device](const Tensor& t) { return t.to(device); });
}

void Module::to(DType dtype) {
  TS_CHECK_DTYPE(is_floating_point(dtype), "[", name_,
                 "::to] only floating point dtypes are accepted (integer buffers keep their "
                 "dtype), got ",
                 dtype);
  convert_tensors(
      *this, [dtype](const Tensor& t) { return is_floating_point(t.dtype()) ? t.to(dtype) : t; });
}

void Module::zero_grad(bool set_to_none) { nn::zero_grad(parameters(), set_to_none); }

}  // namespace tessera::nn
