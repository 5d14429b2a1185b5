#pragma once
// Helpers over lists of parameters (torch.nn.utils), shared by Module and the optimizers.

#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::nn {

// Clears the .grad() of each parameter: undefined (set_to_none, PyTorch's default) or filled with
// zeros in place (detached first, so that a gradient computed with create_graph drops its graph).
void zero_grad(const std::vector<Tensor>& parameters, bool set_to_none = true);

// torch.nn.utils.clip_grad_norm_: the norm_type-norm of all gradients together (parameters without
// a gradient are skipped), and, when it exceeds max_norm, every gradient scaled in place by
// max_norm / (total + 1e-6). Returns the total norm before clipping (0-dim float64 tensor; 0 when
// no parameter has a gradient). norm_type may be infinity. DTensor gradients count whole (their
// norms are reduced over their mesh, as PyTorch's DTensor norm does), on any number of meshes
// (FSDP x TP: the tensor-parallel parameters on the 2-D mesh, the others on its "dp" sub-mesh);
// plain gradients beside them (parameters no plan sharded) count once; the total is a plain
// tensor, the same on every rank, and every gradient is scaled alike. Errors: a negative
// max_norm.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0);

}  // namespace tessera::nn
