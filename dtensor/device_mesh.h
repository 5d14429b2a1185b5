#pragma once
// DeviceMesh: the ranks of the world laid out as an n-D array (torch DeviceMesh), with one process
// group per mesh dimension, created once when the mesh is made.
//
// Ranks are laid out row-major: on a 2x3 mesh rank r has coordinate (r / 3, r % 3); the group of
// mesh dim 1 on rank 4 is {3, 4, 5}. Groups over several contiguous mesh dims at once (the
// "flattened" groups the redistribute planner merges collectives into) are made at creation too,
// so no collective is ever created lazily in the middle of a program.
//
// Copies share one state; meshes compare equal when they lay out the same ranks in the same shape
// on the same device type.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/collectives/process_group.h"
#include "tessera/runtime/device.h"
#include "tessera/runtime/shape.h"

namespace tessera {

class DeviceMesh {
 public:
  // Collective over dist::world(): every rank calls it with the same arguments. The mesh must
  // cover the world (product of mesh_shape == world size); dim_names, when given, one per dim
  // and distinct.
  DeviceMesh(DeviceType device_type, const Shape& mesh_shape,
             std::vector<std::string> dim_names = {});

  DeviceType device_type() const;
  int64_t ndim() const;
  // Number of ranks in the mesh, or along one mesh dim.
  int64_t size() const;
  int64_t size(int64_t mesh_dim) const;
  const Shape& shape() const;
  const std::vector<std::string>& mesh_dim_names() const;
  // World ranks of the mesh, row-major.
  const std::vector<int>& ranks() const;

  // The group of the calling rank along a mesh dim (by index or name).
  dist::ProcessGroupPtr get_group(int64_t mesh_dim) const;
  dist::ProcessGroupPtr get_group(const std::string& mesh_dim_name) const;
  // The group along several contiguous mesh dims (ascending), ranks ordered row-major over them;
  // null when the mesh has no such group (non-contiguous dims).
  dist::ProcessGroupPtr flattened_group(const std::vector<int64_t>& mesh_dims) const;

  // The calling rank's coordinate; nullopt when it is not in the mesh.
  std::optional<std::vector<int64_t>> get_coordinate() const;
  // The calling rank's index along a mesh dim (its rank in get_group(mesh_dim)).
  int64_t get_local_rank(int64_t mesh_dim) const;
  int64_t get_local_rank(const std::string& mesh_dim_name) const;

  // The 1-D (or k-D) sub-mesh of the calling rank along the named dims, sharing this mesh's
  // groups (no collective).
  DeviceMesh operator[](const std::string& mesh_dim_name) const;
  DeviceMesh operator[](const std::vector<std::string>& mesh_dim_names) const;

  // The mesh this one was taken from with operator[] (itself when it was not), and the dims of
  // that mesh this one's dims are: fully_shard on mesh["dp"] finds the 2-D mesh whose "tp" dim
  // carries the parameters' tensor-parallel placements (torch's _get_root_mesh).
  DeviceMesh root_mesh() const;
  std::vector<int64_t> root_dims() const;

  // Which runs of contiguous mesh dims have a flattened group: bit i of a canonical enumeration
  // of the runs (first, last) with first < last (plans differ with it, so caches key on it).
  uint64_t flattened_groups_mask() const;

  // The mesh dim of a name; Error naming the valid names otherwise.
  int64_t dim_of(const std::string& mesh_dim_name) const;

  bool operator==(const DeviceMesh& other) const;
  bool operator!=(const DeviceMesh& other) const { return !(*this == other); }
  // Identity of the shared state (for caches keyed by mesh).
  const void* id() const { return state_.get(); }
  std::string to_string() const;

  struct State;

 private:
  explicit DeviceMesh(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// torch.distributed.device_mesh.init_device_mesh over dist::world().
DeviceMesh init_device_mesh(DeviceType device_type, const Shape& mesh_shape,
                            std::vector<std::string> mesh_dim_names = {});

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh);

}  // namespace tessera
