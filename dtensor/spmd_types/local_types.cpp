#include "tessera/dtensor/spmd_types/local_types.h"

#include <typeinfo>

#include "tessera/runtime/distributed.h"

namespace tessera::spmd {

namespace detail {

struct TypedMeta final : DistributedMetaBase {
  TypedMeta(Tensor l, LocalTypes t, DeviceMesh m)
      : local(std::move(l)), types(std::move(t)), mesh(std::move(m)) {}
  Tensor local;
  LocalTypes types;
  DeviceMesh mesh;
};

namespace {

thread_local const DeviceMesh* current_mesh = nullptr;

const TypedMeta& checked_meta(const Tensor& t) {
  const TypedMeta* m = typed_meta(t);
  TS_INTERNAL_ASSERT(m != nullptr, "not a local SPMD-typed tensor");
  return *m;
}

}  // namespace

const TypedMeta* typed_meta(const Tensor& t) {
  const TensorImpl* impl = t.unsafe_impl();
  if (impl == nullptr || impl->dist_meta == nullptr) return nullptr;
  // typeid of a final class: one comparison, cheaper than a dynamic_cast on every DTensor op.
  const DistributedMetaBase& base = *impl->dist_meta;
  if (typeid(base) != typeid(TypedMeta)) return nullptr;
  return static_cast<const TypedMeta*>(&base);
}

Tensor make_typed(Tensor local, LocalTypes types, const DeviceMesh& mesh) {
  TS_INTERNAL_ASSERT(local.defined() && !local.is_distributed(), "make_typed of ",
                     local.defined() ? "a distributed tensor" : "an undefined tensor");
  TS_INTERNAL_ASSERT(static_cast<int64_t>(types.size()) == mesh.ndim(), "types ", to_string(types),
                     " for a mesh of ", mesh.ndim(), " dims");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = local.storage();
  impl->sizes = local.sizes();
  impl->strides = local.strides();
  impl->offset = local.storage_offset();
  impl->dtype = local.dtype();
  impl->refresh_contiguous();
  impl->dist_meta = std::make_shared<TypedMeta>(std::move(local), std::move(types), mesh);
  return Tensor(std::move(impl));
}

const Tensor& typed_local(const Tensor& t) { return checked_meta(t).local; }
const LocalTypes& types_of(const Tensor& t) { return checked_meta(t).types; }
const DeviceMesh& mesh_of(const Tensor& t) { return checked_meta(t).mesh; }

std::string mesh_dim_name(const DeviceMesh& mesh, int64_t mesh_dim) {
  const std::vector<std::string>& names = mesh.mesh_dim_names();
  if (names.empty()) return "mesh dim " + std::to_string(mesh_dim);
  return "mesh dim '" + names[static_cast<size_t>(mesh_dim)] + "'";
}

CurrentMeshGuard::CurrentMeshGuard(const DeviceMesh& mesh) : previous_(current_mesh) {
  current_mesh = &mesh;
}
CurrentMeshGuard::~CurrentMeshGuard() { current_mesh = previous_; }

}  // namespace detail

const char* to_string(LocalType type) {
  switch (type) {
    case LocalType::kR:
      return "R";
    case LocalType::kI:
      return "I";
    case LocalType::kV:
      return "V";
    case LocalType::kP:
      return "P";
  }
  return "?";
}

std::string to_string(const LocalTypes& types) {
  std::string s = "[";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0) s += ", ";
    s += to_string(types[i]);
  }
  return s + "]";
}

LocalType backward_type(LocalType type) {
  switch (type) {
    case LocalType::kR:
      return LocalType::kP;
    case LocalType::kP:
      return LocalType::kR;
    default:
      return type;
  }
}

std::optional<LocalTypes> local_types(const Tensor& t) {
  if (detail::typed_meta(t) == nullptr) return std::nullopt;
  return detail::types_of(t);
}

Tensor assert_type(const Tensor& t, const LocalTypes& types) {
  TS_CHECK(t.defined(), "[spmd::assert_type] undefined tensor");
  if (detail::typed_meta(t) != nullptr) {
    TS_CHECK(detail::types_of(t) == types, "[spmd::assert_type] the tensor has local SPMD types ",
             to_string(detail::types_of(t)), " (one per mesh dim), not ", to_string(types));
    return t;
  }
  TS_CHECK(!t.is_distributed(),
           "[spmd::assert_type] a DTensor has placements, not local SPMD "
           "types; annotate the local tensors inside local_map");
  TS_CHECK(detail::current_mesh != nullptr,
           "[spmd::assert_type] a plain tensor can be typed only inside a function run by "
           "local_map with spmd_types=true (whose mesh the types refer to)");
  const DeviceMesh& mesh = *detail::current_mesh;
  TS_CHECK(static_cast<int64_t>(types.size()) == mesh.ndim(), "[spmd::assert_type] ", types.size(),
           " types ", to_string(types), " for a mesh of ", mesh.ndim(),
           " dims; give one type per mesh dim");
  return detail::make_typed(t, types, mesh);
}

}  // namespace tessera::spmd
