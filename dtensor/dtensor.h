#pragma once
// DTensor: a global tensor laid out over a DeviceMesh by one Placement per mesh dim, holding the
// calling rank's local shard (torch.distributed.tensor.DTensor). SPMD: every rank of the mesh
// runs the same calls in the same order.
//
// Note [DTensor autograd]
// Autograd records the local tensors (DESIGN.md, "Autograd beneath DTensor"): from_local,
// to_local, full_tensor and redistribute are autograd Functions whose backward runs the dual
// redistribute, itself recorded, so they are differentiable twice. The gradient of a DTensor's
// local tensor always has the DTensor's placements with Partial replaced by Replicate
// (dtensor::normalize_for_grad); grad_placements hints are converted to that layout where they
// enter (to_local's backward reduces a Partial hint with an all_reduce where PyTorch would carry
// the Partial to the next redistribute).

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "tessera/collectives/work.h"
#include "tessera/dtensor/dtensor_spec.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

struct FromLocalOptions {
  // Check the ranks agree on dtype and global shape (given, or inferred from the local shape, so
  // uneven local shapes without an explicit shape raise), then broadcast coordinate 0's data
  // into the local tensor (in place, as PyTorch) along every Replicate mesh dim.
  bool run_check = false;
  // The global shape and stride; both or neither (then computed assuming even shards).
  std::optional<Shape> shape = std::nullopt;
  std::optional<Shape> stride = std::nullopt;
  // Placements the gradient of the local tensor should have (default: placements, Partial ->
  // Replicate).
  std::optional<Placements> grad_placements = std::nullopt;
};

struct ToLocalOptions {
  // Placements of the gradient that will flow into the returned local tensor (default: this
  // DTensor's placements, Partial -> Replicate).
  std::optional<Placements> grad_placements = std::nullopt;
};

struct RedistributeOptions {
  // Leave the last collective running; wait() (or any use of the data) completes it.
  bool async_op = false;
  // Cast the local tensor before communicating; the result has this dtype.
  std::optional<DType> forward_dtype = std::nullopt;
  // The dtype the backward collective runs in (default: the result's); the gradient is cast
  // back to the input's dtype.
  std::optional<DType> backward_dtype = std::nullopt;
};

// One chunk of a DTensor held by this rank (torch's ChunkStorageMetadata): global offsets and
// sizes. A StridedShard shard is several chunks.
struct ChunkMeta {
  Shape offsets;
  Shape sizes;
};

// A DTensor is a Tensor (Note [Distributed dispatch] in runtime/distributed.h): its sizes,
// strides and dtype are the global tensor's, every op accepts it, and ops on DTensors return
// DTensors (as Tensors; `DTensor y = matmul(x, w);` converts back without a copy).
class DTensor : public Tensor {
 public:
  DTensor() = default;
  // The DTensor that `t` is. Errors: `t` is a plain (not distributed) tensor. An undefined `t`
  // gives an undefined DTensor.
  DTensor(const Tensor& t);  // NOLINT(google-explicit-constructor): a DTensor is a Tensor

  // Wraps the calling rank's shard. Errors: wrong number of placements for the mesh, shard dim
  // out of range, mixed Partial ops, shape without stride (or the reverse), local shape not the
  // shard of `shape` this rank should hold, and (run_check) ranks disagreeing on dtype or
  // shape.
  static DTensor from_local(const Tensor& local, const DeviceMesh& mesh,
                            const Placements& placements, FromLocalOptions options = {});

  // The local shard (differentiable, see Note [DTensor autograd]).
  Tensor to_local(ToLocalOptions options = {}) const;
  // The whole tensor on every rank: redistribute to all Replicate, then to_local.
  Tensor full_tensor(ToLocalOptions options = {}) const;
  // The same global tensor with other placements on the same mesh (differentiable).
  DTensor redistribute(const Placements& placements, RedistributeOptions options = {}) const;
  // Another mesh is an Error (cross-mesh redistribute is not supported).
  DTensor redistribute(const DeviceMesh& mesh, const Placements& placements,
                       RedistributeOptions options = {}) const;
  // Completes an async redistribute (no-op otherwise).
  const DTensor& wait() const;

  // ---- metadata (shape(), sizes(), size(d), numel(), dtype(), device() are Tensor's) ----
  using Tensor::stride;
  const Shape& stride() const { return spec().stride; }
  int64_t ndim() const { return dim(); }
  const DeviceMesh& device_mesh() const { return spec().mesh; }
  const Placements& placements() const { return spec().placements; }
  const DTensorSpec& spec() const;
  const std::shared_ptr<const DTensorSpec>& spec_ptr() const;
  // The chunks of the global tensor this rank holds (torch __create_chunk_list__); an empty shard
  // has its offset at the dim's size.
  std::vector<ChunkMeta> chunk_list() const;

  // ---- autograd (a DTensor's autograd state is its local tensor's) ----
  const DTensor& requires_grad_(bool requires_grad = true) const;
  // The gradient as a DTensor (placements Partial -> Replicate); undefined when none.
  DTensor grad() const;
  void backward(const DTensor& gradient = {}, BackwardOptions options = {}) const;

  // Internal: wraps a local tensor that already is this rank's shard of `spec`; `pending` is a
  // collective still writing it, reading `keep_alive`.
  DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec, dist::WorkPtr pending = nullptr,
          std::vector<Tensor> keep_alive = {});
  // The local tensor without waiting or recording (for the library's own Functions).
  const Tensor& unsafe_local() const;
};

std::ostream& operator<<(std::ostream& os, const DTensor& t);

// Shards (or replicates) `tensor` over the mesh: rank src_data_rank's data is the source (every
// rank passes a tensor of the same shape and dtype); nullopt uses each rank's own data, which
// must then agree. Placements default to all Replicate; Partial(sum) puts the value on
// coordinate 0 of its mesh dim and zeros elsewhere (exact), Partial(avg/min/max) everywhere.
// The result is a leaf; it requires grad when `tensor` does.
DTensor distribute_tensor(const Tensor& tensor, const DeviceMesh& mesh, Placements placements = {},
                          std::optional<int> src_data_rank = 0);

}  // namespace tessera
