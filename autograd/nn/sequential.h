#pragma once
// nn::Sequential (torch.nn.Sequential): children named "0", "1", ... in order; forward calls each
// child (through operator(), so the children's hooks run) on the previous child's output.

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>

#include "tessera/autograd/nn/module.h"

namespace tessera::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  // Errors: a null module.
  Sequential(std::initializer_list<ModulePtr> modules);

  // Appends `module` as child std::to_string(size()). Errors: a null module.
  void push_back(ModulePtr module);
  // The identity when empty.
  Tensor forward(const Tensor& input) override;

  size_t size() const { return named_children().size(); }
  // Errors: i >= size().
  const ModulePtr& operator[](size_t i) const;
  // The i-th child as an M. Errors: i >= size(), a child that is not an M.
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    std::shared_ptr<M> typed = std::dynamic_pointer_cast<M>((*this)[i]);
    TS_CHECK(typed != nullptr, "[", name(), "::at] child ", i, " is a ", (*this)[i]->name(),
             ", not the requested type");
    return typed;
  }

 protected:
  // For subclasses that build their layer list themselves (MLP).
  explicit Sequential(std::string name) : Module(std::move(name)) {}
};

}  // namespace tessera::nn
