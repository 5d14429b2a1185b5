#pragma once
// What a DTensor's TensorImpl carries in its dist_meta slot (Note [Distributed dispatch] in
// runtime/distributed.h): the calling rank's local shard and the spec.

#include <memory>
#include <vector>

#include "tessera/collectives/work.h"
#include "tessera/dtensor/dtensor_spec.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dtensor {

struct DTensorMeta final : DistributedMetaBase {
  Tensor local;
  std::shared_ptr<const DTensorSpec> spec;
  // An async redistribute still writing `local`, reading `keep_alive` (see DTensor::wait).
  dist::WorkPtr pending;
  std::vector<Tensor> keep_alive;
  // A view of a DTensor (narrow, select, view, ...) whose local is a view of a redistributed copy
  // rather than of its base's shard (the view cut or regrouped a sharded dim), or a view of such a
  // view: writing it in place would not write the base, as it does on one device, so in-place ops
  // on it raise (Note [Writing views of DTensors] in dtensor/dispatch.cpp).
  bool view_of_copy = false;
  // What the parallel styles' input hooks redistributed this DTensor to under autograd, valid
  // while both keep their data and until its backward ran (Note [One gather for inputs the
  // styles share] in dtensor/parallel/parallelize.cpp).
  struct SharedRedistribute {
    Placements placements;
    Tensor result;
    uint64_t version = 0;         // of this DTensor's local storage
    uint64_t result_version = 0;  // of the result's local storage
  };
  std::vector<SharedRedistribute> shared_redistributes;
};

// The meta of a distributed tensor (an internal error for a plain one).
DTensorMeta& meta_of(const Tensor& t);

// A distributed tensor of `spec` whose local shard is `local` (global sizes, strides and dtype
// from the spec; the local dtype must be the spec's).
Tensor make_distributed(Tensor local, std::shared_ptr<const DTensorSpec> spec,
                        dist::WorkPtr pending = nullptr, std::vector<Tensor> keep_alive = {});

// The local shard after completing a pending redistribute.
const Tensor& ready_local(const Tensor& t);

}  // namespace tessera::dtensor
