#pragma once
// replicate (torch.distributed._composable.replicate, PyTorch's DDP): data parallel with plain
// replicated parameters. Every rank runs the whole module on its own part of the batch; backward
// averages the gradients over the mesh in buckets, each bucket's all_reduce issued asynchronously
// as soon as its gradients are in, so the communication of the last layers' gradients overlaps
// the computation of the first layers' (See Note [Gradient buckets] in replicate.cpp).
//
// replicate(module, mesh) broadcasts every parameter and buffer from the mesh's first rank, so
// that all ranks start equal, and lays the parameters that require grad out in buckets: reverse
// registration order (named_parameters reversed: backward produces the gradients roughly so), at
// most bucket_cap_mb MiB each (a larger parameter gets a bucket of its own), one dtype and device
// per bucket. Each bucket has one flat buffer, allocated once and reused every step.
//
// After loss.backward() returns, every such parameter's .grad() is the average over the mesh of
// the ranks' gradients (plus whatever .grad() held before: see NoSyncGuard), the same on every
// rank, and the optimizer can step. Each rank's loss being the mean over its equal share of the
// batch, that is the gradient of the whole batch's mean, as one device computes it.
//
// A parameter that gets no gradient in a backward on a rank contributes its .grad() so far (zeros
// if undefined) to its bucket; where its .grad() was undefined it stays undefined on that rank
// (torch's find_unused_parameters, which agrees on the unused set across ranks, is not provided:
// use a parameter on every rank or on none).
//
// Limits, as DDP's: the layout is fixed at replicate() time (move or cast the module first; a
// parameter whose dtype, device or size changed later raises in backward); a parameter that
// starts requiring grad later is not averaged; gradient hooks registered on a parameter after
// replicate() run after its gradient was copied to the bucket (register them before); a backward
// nested in a Function's backward (reentrant checkpointing) is unsupported (it reduces on its
// own, or raises where a parameter gets gradients from it and the pass around it); autograd::grad
// through the parameters runs their hooks too (a leaf's hooks run whether or not its .grad() is
// written) and would rewrite .grad(): call it inside a NoSyncGuard; under create_graph the
// averaged gradients carry no graph.

#include <memory>

#include "tessera/autograd/nn/module.h"
#include "tessera/dtensor/device_mesh.h"

namespace tessera {

struct ReplicateOptions {
  // The largest bucket, in MiB (2^20 bytes), as DDP's bucket_cap_mb.
  double bucket_cap_mb = 25.0;
};

// Collective over `mesh` (the broadcasts). Errors (before anything changes): a mesh that is not
// 1-D, bucket_cap_mb not > 0, a module replicated before, a module in its subtree fully_shard'ed,
// a parameter another replicate() manages (a replicated parent or child), a DTensor parameter.
void replicate(nn::Module& module, const DeviceMesh& mesh, ReplicateOptions options = {});

namespace detail {
struct ReplicateState;
}

// DDP's no_sync: while the guard lives, backward passes through `replicated` accumulate local
// gradients into .grad() without communicating; the next backward outside it averages the
// accumulated .grad() over the mesh. Decided when a backward's first bucket hook runs (DDP
// decides at forward). Guards nest; destroy them on the thread that made them, in reverse order.
// Errors: a module replicate() did not run on.
class NoSyncGuard {
 public:
  explicit NoSyncGuard(nn::Module& replicated);
  ~NoSyncGuard();
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  std::shared_ptr<detail::ReplicateState> state_;
  bool previous_;
};

}  // namespace tessera
