#pragma once
// The distributed-dispatch hooks for local SPMD-typed tensors (Note [Local SPMD types] in
// dtensor/spmd_types/local_types.h): dtensor/dispatch.cpp hands every call with a typed
// argument, and every other hook on a typed tensor, to these.

#include <string>
#include <vector>

#include "tessera/runtime/distributed.h"

namespace tessera::spmd::detail {

bool any_typed(const std::vector<Tensor>& tensors);

// Checks the op's typing rules along every mesh dim (Note [Typing an op] in checker.cpp), runs it
// on the local tensors and types its outputs. Errors name the op, the mesh dim and what is valid.
std::vector<Tensor> typed_dispatch(const char* op, const std::vector<Tensor>& tensors,
                                   const OpAttrs& attrs, const LocalOp& local);

// The remaining hooks (DistributedHooks in runtime/distributed.h) for a typed tensor.
Tensor typed_full_tensor(const Tensor& t);
Tensor typed_wrap_like(const Tensor& local, const Tensor& like, bool as_grad);
Tensor typed_grad_local(const Tensor& grad, const Tensor& like, const char* op);
std::string typed_describe(const Tensor& t);

}  // namespace tessera::spmd::detail
