#include "tessera/runtime/distributed.h"

namespace tessera {

const DistributedHooks& distributed_hooks() {
  static const DistributedHooks table = [] {
    DistributedHooks hooks;
    install_distributed_hooks(hooks);
    return hooks;
  }();
  return table;
}

std::vector<Tensor> distributed_op_multi(const char* op, const std::vector<Tensor>& inputs,
                                         const OpAttrs& attrs, const LocalOp& local) {
  return distributed_hooks().dispatch(op, inputs, attrs, local);
}

Tensor distributed_op(const char* op, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                      const LocalOp& local) {
  std::vector<Tensor> out = distributed_hooks().dispatch(op, inputs, attrs, local);
  TS_INTERNAL_ASSERT(out.size() == 1, "[", op, "] dispatch returned ", out.size(), " outputs");
  return std::move(out[0]);
}

}  // namespace tessera
