#pragma once
// AdamW's update in one pass over each element (torch's fused CPU AdamW): the composite update of
// adamw.cpp is about a dozen elementwise ops, each a pass over the parameter's memory and, on a
// DTensor, a dispatch through sharding propagation; this reads the parameter, its gradient and
// the moments once and writes them once.

#include "tessera/autograd/optim/adamw.h"

namespace tessera::optim::detail {

// The update of adamw_update on `param` (state materialized, its step already counted, bias
// corrections given), in one pass, where it can: float32 or float64 CPU tensors, contiguous, of
// one dtype and element count (a DTensor's local tensors, when param, grad and the moments are
// DTensors of one layout). The same operations in the same order as the composite update, each
// rounded to the dtype. Returns false, changing nothing, where it cannot.
bool adamw_update_fused(const Tensor& param, const Tensor& grad, AdamWState& state,
                        const AdamWOptions& options, double bias_correction1,
                        double bias_correction2_sqrt);

}  // namespace tessera::optim::detail
