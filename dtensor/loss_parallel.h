#pragma once
// LossParallelGuard (torch.distributed.tensor.parallel.loss_parallel): while one lives on the
// calling rank thread, cross_entropy on logits sharded on the class dim computes the loss without
// gathering the logits (three small all_reduces forward: the row max, the sum of exponentials,
// the target logit), and its backward needs no collective.

#include <optional>
#include <vector>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

class LossParallelGuard {
 public:
  LossParallelGuard();
  ~LossParallelGuard();
  LossParallelGuard(const LossParallelGuard&) = delete;
  LossParallelGuard& operator=(const LossParallelGuard&) = delete;
  static bool active();
};

namespace dtensor {

// What dtensor/dispatch.cpp calls for "cross_entropy" (inputs {logits, target}, attrs as
// runtime/ops/nn.cpp passes them) while a LossParallelGuard is active.
std::vector<Tensor> loss_parallel_cross_entropy(const std::vector<Tensor>& inputs,
                                                const OpAttrs& attrs);

}  // namespace dtensor
}  // namespace tessera
