#pragma once
// The autograd Functions behind DTensor's differentiable conversions (Note [DTensor autograd] in
// dtensor/dtensor.h). Each takes and returns local tensors; specs travel as shared pointers.

#include <memory>
#include <optional>

#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/redistribute/execute.h"

namespace tessera::dtensor {

// The local tensor of `src` redistributed to `dst` (normalized placements). With
// options.async_op, `pending` (if not null) receives the still-running collective.
Tensor redistribute_local(const Tensor& local, const std::shared_ptr<const DTensorSpec>& src,
                          const Placements& dst, const RedistributeOptions& options,
                          ExecuteResult* pending = nullptr);

// from_local's recorded identity: backward turns the gradient (normalized placements of `spec`)
// into `grad_placements` when given.
Tensor from_local_identity(const Tensor& local, const std::shared_ptr<const DTensorSpec>& spec,
                           const std::optional<Placements>& grad_placements);

// to_local's recorded identity: backward turns a gradient laid out as `grad_placements` into
// the normalized placements of `spec`.
Tensor to_local_identity(const Tensor& local, const std::shared_ptr<const DTensorSpec>& spec,
                         const std::optional<Placements>& grad_placements);

// Whether `local` is the recorded result of a redistribute whose backward has not run yet: new
// consumers may still share it (Note [One gather for inputs the styles share]).
bool awaits_backward(const Tensor& local);

// The identity on `local`, whose spec (`spec`, the placements the op runs with) is Replicate
// along `mesh_dims` where the op's output is not: backward sums the gradient over those dims.
Tensor sum_grad_over(const Tensor& local, const std::shared_ptr<const DTensorSpec>& spec,
                     const std::vector<int64_t>& mesh_dims);

}  // namespace tessera::dtensor
