#pragma once
// fully_shard (PyTorch's FSDP2, torch.distributed.fsdp.fully_shard): a module's parameters become
// Shard(0) DTensors on a mesh; each call gathers them (one all_gather of one flat buffer per
// fully_shard'ed module), runs forward on plain tensors with the unsharded parameters, and the
// backward reduce_scatters (averages) the gradients into the shards (one reduce_scatter per
// module). Apply it to the inner modules first (each layer), then to the root: a module manages
// the parameters of its subtree that no inner fully_shard manages.
//
// reshard_after_forward (the default) gives the unsharded parameters' memory back after forward
// and gathers them again when backward reaches the module's output (PyTorch's FSDP2 resharding):
// forward and backward each all_gather once per module. Without it they stay until backward. The
// outermost fully_shard'ed module (the root: fully_shard'ed last, inside no other) keeps its
// parameters until backward either way, as torch's FSDP2: backward would gather them at once.
//
// Prefetch (FSDP2's implicit forward and backward prefetch): from the second forward on, each
// module's all_gather is issued asynchronously when the module before it in the first forward's
// order starts, and in backward each resharded module issues the gather of the one backward
// reaches next before its own reduce_scatter, so that gathers run on the group's progress thread
// while the ranks compute; at most two modules are unsharded at once (Note [FSDP prefetch] in
// fully_shard.cpp). Each reduce_scatter is issued asynchronously too, and the gradients reach the
// shards' .grad() when the backward pass has run every node, before it returns (Note [FSDP
// reduce_scatter in flight]); hooks registered on the sharded parameters do not see them.
//
// 2-D (torch's FSDP2 + TP): fully_shard(m, mesh["dp"]) after parallelize_module(m, mesh["tp"],
// plan) shards each tensor-parallel shard's rows over dp; the parameters become DTensors on the
// 2-D mesh (Shard(0) on dp, or StridedShard(0, tp size) when tp shards rows too and dp is the
// first mesh dim), and forward sees them as the tp DTensors the styles made.
//
// Shared parameters stay one parameter, as named_parameters lists them: a module reached at two
// paths is sharded once, and a tied weight (an embedding and the output head sharing it) is one
// DTensor that every module using it sees unsharded in forward. As FSDP2, a shared parameter
// belongs to the unit of its uses' lowest common ancestor: fully_shard(root) after
// fully_shard(embedding) moves the tied weight from the embedding's unit to the root's.
//
// Parameters with fewer rows than ranks are fine: torch.chunk gives the trailing ranks empty
// shards, padded with zeros in the flat buffers (an 8-row weight on 4 ranks holds 2 rows each; a
// 3-row bias holds 1, 1, 1, 0).

#include <optional>

#include "tessera/autograd/nn/module.h"
#include "tessera/dtensor/device_mesh.h"
#include "tessera/runtime/dtype.h"

namespace tessera {

struct FullyShardOptions {
  bool reshard_after_forward = true;
  // Gather and compute in this dtype (the shards keep theirs).
  std::optional<DType> param_dtype = std::nullopt;
  // Reduce gradients in this dtype (default: param_dtype, else the parameter's).
  std::optional<DType> reduce_dtype = std::nullopt;
};

// Errors: a mesh that is not 1-D, a non-floating param_dtype or reduce_dtype, a module
// fully_shard'ed before, a 0-dim parameter, a parameter
// shared with a module another fully_shard manages outside this module's subtree, a DTensor
// parameter not on the other dim of the 2-D mesh `mesh` is a dim of (or Partial there), a 2-D
// layout placements cannot describe (uneven tensor-parallel rows, see fully_shard.cpp).
void fully_shard(nn::Module& module, const DeviceMesh& mesh, FullyShardOptions options = {});

}  // namespace tessera
