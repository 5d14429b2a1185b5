#pragma once
// Runs a redistribute plan on the calling rank's local tensor with the mesh's process groups.

#include <vector>

#include "tessera/collectives/work.h"
#include "tessera/dtensor/redistribute/plan.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

struct ExecuteResult {
  Tensor local;
  // With async_op, the last collective may still be running: wait() on it before reading local.
  dist::WorkPtr pending;
  // Tensors the pending collective reads; kept alive until it completes.
  std::vector<Tensor> keep_alive;
};

// The local tensor of `src` moved through plan's steps: the local tensor of the target spec.
// Never modifies `local`. Runs without recording autograd (the caller's Function records).
ExecuteResult execute_plan(const Tensor& local, const DTensorSpec& src,
                           const RedistributePlan& plan, bool async_op = false);

}  // namespace tessera::dtensor
