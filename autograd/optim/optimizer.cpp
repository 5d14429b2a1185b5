#include "tessera/autograd/optim/optimizer.h"

#include <typeinfo>

namespace tessera::optim {

namespace {

[[noreturn]] void no_checkpoint_access(const Optimizer& optimizer, const char* what) {
  throw NotSupportedError(tessera::detail::concat_message(
      "[Optimizer.", what, "] ", typeid(optimizer).name(),
      " does not expose its state to checkpoints: override state_refs, num_param_groups and "
      "option_refs (Note [Optimizer state in checkpoints]), or derive from GroupedOptimizer"));
}

}  // namespace

Optimizer::StateRefs Optimizer::state_refs(const Tensor&) {
  no_checkpoint_access(*this, "state_refs");
}

size_t Optimizer::num_param_groups() const { no_checkpoint_access(*this, "num_param_groups"); }

std::vector<Optimizer::OptionRef> Optimizer::option_refs(size_t) {
  no_checkpoint_access(*this, "option_refs");
}

}  // namespace tessera::optim

namespace tessera::optim::detail {

void check_param(const Tensor& param, const char* op, std::unordered_set<const TensorImpl*>& seen) {
  TS_CHECK(param.defined(), "[", op, "] a parameter is an undefined tensor");
  TS_CHECK(param.is_leaf(), "[", op, "] can't optimize a non-leaf tensor (shape ", param.shape(),
           "): pass the leaves, e.g. module->parameters()");
  TS_CHECK_DTYPE(is_floating_point(param.dtype()), "[", op,
                 "] parameters must have a floating point dtype, got ", param.dtype());
  TS_CHECK(seen.insert(param.unsafe_impl()).second, "[", op, "] a parameter (shape ", param.shape(),
           ") appears more than once across the parameter groups");
}

}  // namespace tessera::optim::detail
