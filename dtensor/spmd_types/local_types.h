#pragma once
// Local SPMD types (meta-pytorch/spmd_types, reference/pytorch-dtensor-notes.md section 8): what
// a rank's local tensor means along each mesh dim, checked op by op inside
// local_map(..., {.spmd_types = true}).
//
// Note [Local SPMD types]
// Along one mesh dim a local tensor is
//   R (replicate): the same value on every rank; consumers may do different work with it, so its
//                  gradient is a pending sum (P);
//   I (invariant): the same value and the same work on every rank; its gradient is I;
//   V (varying):   a different value per rank (a shard, a per-rank result); its gradient is V;
//   P (partial):   a pending sum over the ranks; its gradient is R.
// Inside local_map with spmd_types the local tensors are typed: each is a distributed tensor
// (Note [Distributed dispatch] in runtime/distributed.h) whose dist_meta holds the plain local
// tensor and one type per mesh dim. Every op entry point hands calls on typed tensors to the
// distributed dispatch, which dtensor/spmd_types/checker.cpp checks before running the op on
// the local tensors, so no op escapes the check: ops outside the registry are Errors, and a typed
// tensor has no data of its own for code that bypasses the dispatch. Types change only through
// the typed collectives of dtensor/spmd_types/collectives.h. Autograd records the local ops as
// usual; under these types the local gradient of an R tensor is a per-rank part (P), which the
// collectives' backward reduces, and local_map's boundary gives inputs and outputs the gradient
// placements their types imply.

#include <optional>
#include <string>
#include <vector>

#include "tessera/dtensor/device_mesh.h"
#include "tessera/runtime/tensor.h"

namespace tessera::spmd {

enum class LocalType : unsigned char { kR, kI, kV, kP };

// One type per mesh dim of the enclosing local_map's mesh.
using LocalTypes = std::vector<LocalType>;

// "R", "I", "V", "P"; and "[V, R]".
const char* to_string(LocalType type);
std::string to_string(const LocalTypes& types);

// The type of the gradient (R <-> P, I and V their own).
LocalType backward_type(LocalType type);

// The types of a typed local tensor; nullopt for any other tensor.
std::optional<LocalTypes> local_types(const Tensor& t);

// spmd.assert_type: a typed `t` is returned when its types are `types` (else an Error naming
// both); a plain `t` (e.g. a factory's result, which spmd_types types R) is returned typed
// `types`. Errors: a plain tensor outside local_map(spmd_types=true), a DTensor, `types` of
// another length than the mesh's dims.
Tensor assert_type(const Tensor& t, const LocalTypes& types);

}  // namespace tessera::spmd

namespace tessera::spmd::detail {

// What a typed tensor's dist_meta holds; see Note [Local SPMD types].
struct TypedMeta;

// The typed meta of `t`, or null when `t` is not a typed tensor.
const TypedMeta* typed_meta(const Tensor& t);
// `local` (plain) typed `types` on `mesh`.
Tensor make_typed(Tensor local, LocalTypes types, const DeviceMesh& mesh);
// The local tensor and types of a typed tensor (an internal error for another tensor).
const Tensor& typed_local(const Tensor& t);
const LocalTypes& types_of(const Tensor& t);
const DeviceMesh& mesh_of(const Tensor& t);

// A mesh dim in errors: 'tp' when the mesh names its dims, else its index.
std::string mesh_dim_name(const DeviceMesh& mesh, int64_t mesh_dim);

// The mesh of the local_map(spmd_types=true) call running on this thread (for assert_type on
// plain tensors): set for the scope of one.
class CurrentMeshGuard {
 public:
  explicit CurrentMeshGuard(const DeviceMesh& mesh);
  ~CurrentMeshGuard();
  CurrentMeshGuard(const CurrentMeshGuard&) = delete;
  CurrentMeshGuard& operator=(const CurrentMeshGuard&) = delete;

 private:
  const DeviceMesh* previous_;
};

}  // namespace tessera::spmd::detail
