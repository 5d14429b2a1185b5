#pragma once
// local_map (torch.distributed.tensor.experimental.local_map): runs a function written for plain
// tensors on the local shards of DTensor arguments and wraps its results as DTensors, with the
// seed's checks (seeds/torch-local-map-source.py.txt). Arguments and results are in order;
// DTensors are Tensors, and an undefined Tensor stands for a non-tensor argument or result.

#include <functional>
#include <optional>
#include <vector>

#include "tessera/dtensor/device_mesh.h"
#include "tessera/dtensor/placement.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

struct LocalMapOptions {
  // One per output; nullopt: a plain (or undefined) output.
  std::vector<std::optional<Placements>> out_placements = {};
  // One per input; nullopt entry: a plain input. Absent: no placement check.
  std::optional<std::vector<std::optional<Placements>>> in_placements = std::nullopt;
  // The gradient layout each DTensor input's local tensor gets (to_local's grad_placements).
  std::optional<std::vector<std::optional<Placements>>> in_grad_placements = std::nullopt;
  // The mesh of the outputs; default: the first DTensor argument's.
  std::optional<DeviceMesh> device_mesh = std::nullopt;
  // Redistribute DTensor inputs whose placements differ from in_placements (else an Error).
  bool redistribute_inputs = false;
  // Check the local SPMD types (V, R, I, P; Note [Local SPMD types] in
  // dtensor/spmd_types/local_types.h) of every op inside fn, strictly: DTensor inputs with
  // in_placements reach fn typed (Shard -> V, Replicate -> I when its in_grad_placements entry is
  // Replicate else R, Partial(sum) -> P), ops propagate or reject types, the typed collectives of
  // dtensor/spmd_types/collectives.h change them, and each output's types must fit its
  // out_placements and give its gradient placements.
  bool spmd_types = false;
  // Check that every rank's DTensor outputs agree in dtype and global shape (one small
  // all_gather per mesh dim per call), so a fn returning different shapes on different ranks
  // raises here, naming the output, not in a later collective. PyTorch does not check; false
  // skips it for a fn known to be uniform.
  bool check_outputs = true;
};

using LocalFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The wrapped function: with at least one DTensor argument it checks (or redistributes) the
// DTensor arguments against in_placements, calls fn on their local tensors (plain arguments
// pass through), and makes each output a DTensor with its out_placements (from_local, no check);
// without DTensor arguments it is fn itself. Errors, worded as the seed's: in_placements of
// another length than the arguments, a DTensor argument whose in_placements entry is nullopt or
// differs (without redistribute_inputs), a non-tensor argument or output with placements, a
// DTensor output, out_placements of another length than the outputs, and (check_outputs) ranks
// whose outputs differ in dtype or global shape.
// With spmd_types, also the seed's: a placement without a local type (StridedShard, Partial
// other than sum), an in_grad_placements entry its input's type cannot have ("cannot represent
// this forward/backward placement pair"), a Tensor output with nullopt out_placements or the
// reverse, an untyped output, an output whose type does not fit its out_placements ("Output
// tensor placement mismatch on mesh dim ..."); and inside fn every typing Error of the ops
// (dtensor/spmd_types/checker.h) and collectives. A Replicate input typed R gets gradient
// placement Partial when in_grad_placements gives none (its local gradient is each rank's part),
// where the seed keeps to_local's Replicate.
LocalFn local_map(LocalFn fn, LocalMapOptions options);

}  // namespace tessera
