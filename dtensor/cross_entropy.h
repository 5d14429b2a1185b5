#pragma once
// cross_entropy with reduction sum or mean on sharded DTensors (dtensor/dispatch.cpp sends them
// here): the per-row losses come from the op's rule (batch and spatial dims sharded, no
// collective), their sum is a Partial(sum), and mean divides by the number of rows whose target
// is not ignore_index, counted over the whole batch: the single-device value for uneven shards
// too (PyTorch's nll_loss rule warns of a biased mean there instead).

#include <vector>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

// Whether dispatch sends this call here: a reduced loss with an input that is not Replicate on
// every mesh dim (all-Replicate inputs run the single-device op on every rank, bitwise).
bool reduced_cross_entropy_applies(const std::vector<Tensor>& inputs, const OpAttrs& attrs);

// inputs {logits, target}, attrs as runtime/ops/nn.cpp passes them.
Tensor reduced_cross_entropy(const std::vector<Tensor>& inputs, const OpAttrs& attrs);

}  // namespace tessera::dtensor
