#include "tessera/autograd/nn/sequential.h"

namespace tessera::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) : Module("Sequential") {
  for (const ModulePtr& module : modules) push_back(module);
}

void Sequential::push_back(ModulePtr module) {
  register_module(std::to_string(size()), std::move(module));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& entry : named_children()) x = (*entry.second)(x);
  return x;
}

const ModulePtr& Sequential::operator[](size_t i) const {
  TS_CHECK_INDEX(i < size(), "[", name(), "] index ", i, " is out of range for ", size(),
                 " modules");
  return named_children()[i].second;
}

}  // namespace tessera::nn
