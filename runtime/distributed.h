#pragma once
// The seam through which op entry points hand calls on distributed tensors to dtensor/, without
// runtime/ knowing meshes (DESIGN.md, "A DTensor is a Tensor").
//
// Note [Distributed dispatch]
// A distributed tensor is a Tensor whose TensorImpl carries `dist_meta` (dtensor/ defines what is
// inside: the local shard and the spec); its sizes, strides and dtype are the global tensor's and
// it has no data of its own (data_ptr raises). Every op entry point that computes starts with
//
//   if (any_distributed(a, b))
//     return distributed_op("add", {a, b}, {.reals = {alpha}}, [=](const LocalCall& c) {
//       return add(c.in[0], c.in[1], alpha);
//     });
//
// before its autograd check. dtensor/ (dtensor/dispatch.cpp) looks up the op's sharding rule
// by name, chooses placements (cached), redistributes the inputs' local tensors (recorded for
// autograd), calls the lambda on the local tensors (plain Tensors: the local op records as usual)
// and wraps the local results as distributed tensors. The lambda gets the local shapes of the
// outputs for ops whose arguments are sizes (view, reshape, expand); other arguments are global
// and stay valid because rules only shard dims the op treats elementwise.
// OpAttrs carries the non-tensor arguments a rule reads; they are part of the cache key.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/runtime/generator.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

// Slot for dtensor/ (see Note [Distributed dispatch]).
struct DistributedMetaBase {
  virtual ~DistributedMetaBase() = default;
};

// The non-tensor arguments of an op that its sharding rule reads (dims, sizes, flags).
struct OpAttrs {
  std::vector<int64_t> ints = {};
  std::vector<double> reals = {};
  bool flag = false;
};

// Consecutive elements [start, start + length) of a global tensor in row-major order.
struct GlobalRun {
  int64_t start = 0;
  int64_t length = 0;
};

// Where a call's local blocks sit in the global tensors, for the few local ops whose result
// depends on it: random ops draw each element from its global index (Note [Random ops on
// distributed tensors] in runtime/ops/random.cpp), a vocabulary-sharded embedding looks up only
// the rows its rank holds.
class LocalLayout {
 public:
  virtual ~LocalLayout() = default;
  // Input i's local block covers [offset, offset + local size) of global dim `dim`; returns
  // offset. Errors: a block that is not one range of that dim (a StridedShard of it).
  virtual int64_t input_offset(size_t input, int64_t dim) const = 0;
  // The runs of output o's global row-major order that its local block holds, in local order
  // (adjacent runs merged; one run [0, numel) for a replicated output).
  virtual std::vector<GlobalRun> output_runs(size_t output) const = 0;
  // Input i's / output o's global shape.
  virtual Shape input_shape(size_t input) const = 0;
  virtual Shape output_shape(size_t output) const = 0;
  // Random ops call it before drawing: makes `gen`'s state the same on every rank of the call's
  // mesh (that of the mesh's first rank, as PyTorch's RNG tracker takes rank 0's), with one
  // collective after each manual_seed, none otherwise.
  virtual void agree_generator(Generator& gen) const = 0;
};

// What the local lambda receives: the inputs' local tensors (undefined where the op's optional
// input is absent), the local shapes of the outputs the rule chose, and where those blocks sit
// in the global tensors.
struct LocalCall {
  const std::vector<Tensor>& in;
  const std::vector<Shape>& out_shapes;
  const LocalLayout& layout;
};
using LocalOp = std::function<std::vector<Tensor>(const LocalCall&)>;

struct DistributedHooks {
  // Runs `op` on arguments of which at least one is distributed; returns its outputs.
  std::vector<Tensor> (*dispatch)(const char* op, const std::vector<Tensor>& inputs,
                                  const OpAttrs& attrs, const LocalOp& local) = nullptr;
  // The whole tensor on every rank (plain, differentiable).
  Tensor (*full_tensor)(const Tensor& t) = nullptr;
  // The local shard (plain; completes a pending redistribute; not recorded).
  Tensor (*local)(const Tensor& t) = nullptr;
  // `local` as a distributed tensor with the spec of `like`, Partial placements replaced by
  // Replicate when `as_grad` (the layout of gradients).
  Tensor (*wrap_like)(const Tensor& local, const Tensor& like, bool as_grad) = nullptr;
  // The local tensor of `grad` (a DTensor, or a plain tensor taken as Replicate) laid out as the
  // gradient of the DTensor `like` (its placements, Partial -> Replicate; redistributed when
  // needed). Errors: another shape or mesh.
  Tensor (*grad_local)(const Tensor& grad, const Tensor& like, const char* op) = nullptr;
  // A one-line description (shape, dtype, placements, mesh, local shape) for printing.
  std::string (*describe)(const Tensor& t) = nullptr;
  // Whether two distributed tensors are laid out alike (mesh, placements, global shape and
  // stride; dtypes may differ), so that their local tensors hold the same elements.
  bool (*same_layout)(const Tensor& a, const Tensor& b) = nullptr;
};
// Filled once by install_distributed_hooks, which dtensor/ defines.
void install_distributed_hooks(DistributedHooks& hooks);
const DistributedHooks& distributed_hooks();

namespace detail {
inline bool distributed_fast(const Tensor& t) {
  const TensorImpl* impl = t.unsafe_impl();
  return impl != nullptr && impl->dist_meta != nullptr;
}
inline bool distributed_fast(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (distributed_fast(t)) return true;
  }
  return false;
}
}  // namespace detail

// Whether any argument (Tensors or vectors of Tensors; undefined ones allowed) is distributed.
template <typename... Inputs>
bool any_distributed(const Inputs&... inputs) {
  return (detail::distributed_fast(inputs) || ...);
}

// The dispatch hook for an op with one output / several outputs.
Tensor distributed_op(const char* op, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                      const LocalOp& local);
std::vector<Tensor> distributed_op_multi(const char* op, const std::vector<Tensor>& inputs,
                                         const OpAttrs& attrs, const LocalOp& local);

}  // namespace tessera
