#include "tessera/dtensor/device_mesh.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>

#include "tessera/collectives/dist.h"
#include "tessera/runtime/error.h"

namespace tessera {

struct DeviceMesh::State {
  DeviceType device_type = DeviceType::CPU;
  Shape shape;
  std::vector<std::string> names;
  std::vector<int> ranks;
  // Of the rank that made this state (every rank makes its own).
  std::optional<std::vector<int64_t>> coordinate;
  std::vector<dist::ProcessGroupPtr> groups;
  // Contiguous runs of at least two mesh dims -> their group.
  std::map<std::vector<int64_t>, dist::ProcessGroupPtr> flattened;
  // See DeviceMesh::flattened_groups_mask (set by finish_state).
  uint64_t flattened_mask = 0;
  // A sub-mesh's root mesh and its dims there (null root: this is a root).
  std::shared_ptr<const State> root;
  std::vector<int64_t> root_dims;
};

namespace {

std::vector<int64_t> unravel(int64_t index, const Shape& shape) {
  std::vector<int64_t> coord(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    coord[d] = index % shape[d];
    index /= shape[d];
  }
  return coord;
}

int64_t ravel(const std::vector<int64_t>& coord, const Shape& shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coord[d];
  return index;
}

// Positions (in `ranks`, row-major over `shape`) of the points that agree with `coord` outside
// `dims`, in row-major order over `dims`.
std::vector<int> ranks_along(const std::vector<int>& ranks, const Shape& shape,
                             const std::vector<int64_t>& coord, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= shape[d];
  std::vector<int> out;
  out.reserve(static_cast<size_t>(count));
  std::vector<int64_t> c = coord;
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i;
    for (int64_t k = static_cast<int64_t>(dims.size()) - 1; k >= 0; --k) {
      c[dims[k]] = rest % shape[dims[k]];
      rest /= shape[dims[k]];
    }
    out.push_back(ranks[static_cast<size_t>(ravel(c, shape))]);
  }
  return out;
}

// Computes the state's derived fields once it is filled.
void finish_state(DeviceMesh::State& state) {
  const auto nd = static_cast<int64_t>(state.shape.size());
  int bit = 0;
  for (int64_t first = 0; first < nd; ++first) {
    for (int64_t last = first + 1; last < nd; ++last, ++bit) {
      std::vector<int64_t> dims;
      for (int64_t d = first; d <= last; ++d) dims.push_back(d);
      if (bit < 64 && state.flattened.count(dims) != 0) state.flattened_mask |= uint64_t{1} << bit;
    }
  }
}

void check_names(const std::vector<std::string>& names, const Shape& shape) {
  if (names.empty()) return;
  TS_CHECK(names.size() == shape.size(), "[init_device_mesh] got ", names.size(),
           " mesh_dim_names for a mesh of shape ", shape, "; give one name per mesh dim");
  std::set<std::string> seen(names.begin(), names.end());
  TS_CHECK(seen.size() == names.size(), "[init_device_mesh] mesh_dim_names must be distinct, got ",
           fmt::format("[{}]", fmt::join(names, ", ")));
}

}  // namespace

DeviceMesh::DeviceMesh(DeviceType device_type, const Shape& mesh_shape,
                       std::vector<std::string> dim_names) {
  dist::ProcessGroupPtr world = dist::world();
  TS_CHECK(!mesh_shape.empty(), "[init_device_mesh] mesh_shape must have at least one dim");
  for (int64_t s : mesh_shape) {
    TS_CHECK(s >= 1, "[init_device_mesh] mesh dims must be >= 1, got ", mesh_shape);
  }
  TS_CHECK(mesh_shape.numel() == world->size(), "[init_device_mesh] mesh shape ", mesh_shape,
           " has ", mesh_shape.numel(), " ranks but the world has ", world->size(),
           "; the mesh must cover the world");
  check_names(dim_names, mesh_shape);
  auto state = std::make_shared<State>();
  state->device_type = device_type;
  state->shape = mesh_shape;
  state->names = std::move(dim_names);
  for (int r = 0; r < world->size(); ++r) state->ranks.push_back(r);
  const std::vector<int64_t> coord = unravel(world->rank(), mesh_shape);
  state->coordinate = coord;
  const int64_t nd = static_cast<int64_t>(mesh_shape.size());
  // Every rank splits in the same order, so the collective splits line up.
  for (int64_t d = 0; d < nd; ++d) {
    state->groups.push_back(world->split(ranks_along(state->ranks, mesh_shape, coord, {d})));
  }
  for (int64_t first = 0; first < nd; ++first) {
    for (int64_t last = first + 1; last < nd; ++last) {
      std::vector<int64_t> dims;
      for (int64_t d = first; d <= last; ++d) dims.push_back(d);
      state->flattened[dims] = world->split(ranks_along(state->ranks, mesh_shape, coord, dims));
    }
  }
  finish_state(*state);
  state_ = std::move(state);
}

DeviceType DeviceMesh::device_type() const { return state_->device_type; }
int64_t DeviceMesh::ndim() const { return static_cast<int64_t>(state_->shape.size()); }
int64_t DeviceMesh::size() const { return state_->shape.numel(); }
int64_t DeviceMesh::size(int64_t mesh_dim) const {
  return state_->shape[wrap_dim(mesh_dim, ndim(), "DeviceMesh.size")];
}
const Shape& DeviceMesh::shape() const { return state_->shape; }
const std::vector<std::string>& DeviceMesh::mesh_dim_names() const { return state_->names; }
const std::vector<int>& DeviceMesh::ranks() const { return state_->ranks; }

dist::ProcessGroupPtr DeviceMesh::get_group(int64_t mesh_dim) const {
  return state_->groups[wrap_dim(mesh_dim, ndim(), "DeviceMesh.get_group")];
}
dist::ProcessGroupPtr DeviceMesh::get_group(const std::string& name) const {
  return get_group(dim_of(name));
}

dist::ProcessGroupPtr DeviceMesh::flattened_group(const std::vector<int64_t>& mesh_dims) const {
  if (mesh_dims.size() == 1) return get_group(mesh_dims[0]);
  auto it = state_->flattened.find(mesh_dims);
  return it == state_->flattened.end() ? nullptr : it->second;
}

std::optional<std::vector<int64_t>> DeviceMesh::get_coordinate() const {
  return state_->coordinate;
}

int64_t DeviceMesh::get_local_rank(int64_t mesh_dim) const {
  const int64_t d = wrap_dim(mesh_dim, ndim(), "DeviceMesh.get_local_rank");
  TS_CHECK(state_->coordinate.has_value(), "[DeviceMesh.get_local_rank] this rank is not in ",
           to_string());
  return (*state_->coordinate)[d];
}
int64_t DeviceMesh::get_local_rank(const std::string& name) const {
  return get_local_rank(dim_of(name));
}

int64_t DeviceMesh::dim_of(const std::string& name) const {
  const auto& names = state_->names;
  for (size_t d = 0; d < names.size(); ++d) {
    if (names[d] == name) return static_cast<int64_t>(d);
  }
  TS_CHECK(false, "[DeviceMesh] no mesh dim named \"", name, "\"; the mesh's dims are ",
           names.empty() ? std::string("unnamed") : fmt::format("[{}]", fmt::join(names, ", ")));
  return -1;
}

DeviceMesh DeviceMesh::operator[](const std::string& name) const {
  return (*this)[std::vector<std::string>{name}];
}

DeviceMesh DeviceMesh::operator[](const std::vector<std::string>& names) const {
  TS_CHECK(!names.empty(), "[DeviceMesh] a sub-mesh needs at least one mesh dim name");
  std::vector<int64_t> dims;
  for (const std::string& n : names) {
    const int64_t d = dim_of(n);
    TS_CHECK(dims.empty() || d > dims.back(), "[DeviceMesh] sub-mesh dims must be distinct and in ",
             "the mesh's order, got ", fmt::format("[{}]", fmt::join(names, ", ")));
    dims.push_back(d);
  }
  TS_CHECK(state_->coordinate.has_value(), "[DeviceMesh] this rank is not in ", to_string());
  const std::vector<int64_t>& coord = *state_->coordinate;
  auto sub = std::make_shared<State>();
  sub->device_type = state_->device_type;
  sub->names = names;
  sub->ranks = ranks_along(state_->ranks, state_->shape, coord, dims);
  std::vector<int64_t> sub_coord;
  for (int64_t d : dims) {
    sub->shape.push_back(state_->shape[d]);
    sub_coord.push_back(coord[d]);
    sub->groups.push_back(state_->groups[d]);
  }
  sub->coordinate = sub_coord;
  sub->root = state_->root != nullptr ? state_->root : state_;
  for (int64_t d : dims) {
    sub->root_dims.push_back(state_->root != nullptr ? state_->root_dims[d] : d);
  }
  // A run of sub-mesh dims keeps its flattened group when the parent dims are contiguous too.
  for (const auto& [parent_dims, group] : state_->flattened) {
    std::vector<int64_t> local;
    for (int64_t pd : parent_dims) {
      for (size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] == pd) local.push_back(static_cast<int64_t>(k));
      }
    }
    if (local.size() != parent_dims.size()) continue;
    sub->flattened[local] = group;
  }
  finish_state(*sub);
  return DeviceMesh(std::move(sub));
}

bool DeviceMesh::operator==(const DeviceMesh& other) const {
  if (state_ == other.state_) return true;
  return state_->device_type == other.state_->device_type && state_->shape == other.state_->shape &&
         state_->ranks == other.state_->ranks;
}

DeviceMesh DeviceMesh::root_mesh() const {
  return state_->root != nullptr ? DeviceMesh(state_->root) : *this;
}

std::vector<int64_t> DeviceMesh::root_dims() const {
  if (state_->root != nullptr) return state_->root_dims;
  std::vector<int64_t> dims(state_->shape.size());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int64_t>(d);
  return dims;
}

std::string DeviceMesh::to_string() const {
  std::ostringstream os;
  os << "DeviceMesh(" << (state_->device_type == DeviceType::CPU ? "cpu" : "cuda") << ", shape "
     << state_->shape;
  if (!state_->names.empty()) os << fmt::format(", dims [{}]", fmt::join(state_->names, ", "));
  os << ")";
  return os.str();
}

uint64_t DeviceMesh::flattened_groups_mask() const { return state_->flattened_mask; }

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh) {
  return os << mesh.to_string();
}

DeviceMesh init_device_mesh(DeviceType device_type, const Shape& mesh_shape,
                            std::vector<std::string> mesh_dim_names) {
  return DeviceMesh(device_type, mesh_shape, std::move(mesh_dim_names));
}

}  // namespace tessera
