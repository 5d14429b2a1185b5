#include "tessera/autograd/optim/optimizer.h"

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
