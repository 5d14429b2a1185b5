#pragma once
// The typed collectives of spmd_types (reference/pytorch-dtensor-notes.md section 8): the only
// way a local SPMD-typed tensor changes type along a mesh dim (Note [Local SPMD types] in
// dtensor/spmd_types/local_types.h). Each takes a typed tensor whose type on `mesh_dim` is `src`
// and returns one typed `dst` there (the other mesh dims keep theirs); src and dst also choose
// the backward, which is the collective of the gradients' types (table below). V is taken as
// sharded on tensor dim `dim` (spmd_types' S(dim)); gathered blocks must have equal sizes.
//
//   call                          forward                      backward
//   all_reduce(P|V -> R)          sum (V read as P)            all_reduce P -> R
//   all_reduce(P|V -> I)          sum                          identity (convert I -> R)
//   all_gather(V -> R, dim)       concat along dim             reduce_scatter P -> V
//   all_gather(V -> I, dim)       concat along dim             this rank's chunk (convert I -> V)
//   reduce_scatter(P|V -> V, dim) sum, this rank's chunk       all_gather V -> R
//   convert(R -> V, dim)          this rank's chunk            zeros but this rank's block (V -> P)
//   convert(R -> P)               the value on one rank only   convert R -> P
//   convert(I -> R)               identity                     all_reduce P -> I
//   convert(I -> V, dim)          this rank's chunk            all_gather V -> I
//   convert(V -> P, dim)          zeros but this rank's block  this rank's chunk (R -> V)
//   reinterpret(any -> any)       identity                     identity
//
// Errors (all name the call and the mesh dim): an untyped tensor or a DTensor, `mesh_dim` out of
// range, a tensor whose type on mesh_dim is not `src`, a (src, dst) pair the table lacks, and
// all_reduce of R or I data (spmd_types: usually a bug, the value would be multiplied by the
// group size).

#include <cstdint>

#include "tessera/dtensor/spmd_types/local_types.h"

namespace tessera::spmd {

Tensor all_reduce(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst);
Tensor all_gather(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst, int64_t dim);
Tensor reduce_scatter(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst, int64_t dim);
Tensor convert(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst, int64_t dim = 0);
Tensor reinterpret(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst);

}  // namespace tessera::spmd
