#include "tessera/dtensor/generator_sync.h"

#include <vector>

#include "tessera/runtime/ops.h"

namespace tessera::dtensor {
namespace {

// Nonzero, and distinct for meshes of distinct ranks or shapes (FNV-1a over both).
uint64_t mesh_key(const DeviceMesh& mesh) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (int r : mesh.ranks()) mix(static_cast<uint64_t>(r));
  mix(0xFFFFFFFFull);
  for (int64_t d : mesh.shape()) mix(static_cast<uint64_t>(d));
  return h == 0 ? 1 : h;
}

}  // namespace

void agree_generator(const DeviceMesh& mesh, Generator& gen) {
  const uint64_t key = mesh_key(mesh);
  if (gen.agreed_on() == key) return;
  if (mesh.size() > 1) {
    const Tensor state = from_vector(
        std::vector<int64_t>{static_cast<int64_t>(gen.seed()), static_cast<int64_t>(gen.offset())},
        {2});
    // One group over the whole mesh where it has one; else along each mesh dim in turn, from
    // index 0: after dim m every rank holds the state of the rank at index 0 on dims 0..m.
    std::vector<int64_t> all_dims;
    for (int64_t d = 0; d < mesh.ndim(); ++d) all_dims.push_back(d);
    const dist::ProcessGroupPtr whole =
        mesh.ndim() == 1 ? mesh.get_group(0) : mesh.flattened_group(all_dims);
    if (whole != nullptr) {
      whole->broadcast(state, 0)->wait();
    } else {
      for (int64_t d = 0; d < mesh.ndim(); ++d) mesh.get_group(d)->broadcast(state, 0)->wait();
    }
    const int64_t* v = state.data_ptr<int64_t>();
    gen.manual_seed(static_cast<uint64_t>(v[0]));
    gen.set_offset(static_cast<uint64_t>(v[1]));
  }
  gen.set_agreed_on(key);
}

}  // namespace tessera::dtensor
