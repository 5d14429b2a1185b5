#include "tessera/dtensor/dtensor.h"

#include <fmt/format.h>

#include <algorithm>

#include "tessera/collectives/call.h"
#include "tessera/dtensor/dtensor_functions.h"
#include "tessera/dtensor/dtensor_meta.h"
#include "tessera/dtensor/metadata_agreement.h"
#include "tessera/dtensor/redistribute/runs.h"
#include "tessera/dtensor/spmd_types/local_types.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera {

namespace {

using dtensor::normalize_for_grad;

// A gradient hint must describe a local gradient of the local tensor's shape.
void check_hint(const char* op, const DTensorSpec& spec, const Placements& hint) {
  DTensorSpec hinted = spec;
  hinted.placements = hint;
  const Shape hinted_shape = hinted.local_shape();
  const Shape local_shape = spec.local_shape();
  TS_CHECK_SHAPE(hinted_shape == local_shape, "[", op, "] grad_placements ", hint,
                 " give this rank a local gradient of shape ", hinted_shape,
                 " but its local tensor under ", spec.placements, " has shape ", local_shape,
                 "; a hint may change how the gradient is reduced, not its layout");
}
using dtensor::normalize_placements;

// Global shape and stride from a local shard, assuming even shards (torch
// compute_global_tensor_info).
std::pair<Shape, Shape> global_from_local(const Tensor& local, const DeviceMesh& mesh,
                                          const Placements& placements) {
  Shape shape = local.sizes();
  Shape stride = local.strides();
  for (size_t m = 0; m < placements.size(); ++m) {
    if (!placements[m].is_shard()) continue;
    const int64_t d = placements[m].dim();
    const int64_t n = mesh.size(static_cast<int64_t>(m));
    const int64_t shard_stride = stride[static_cast<size_t>(d)];
    shape[static_cast<size_t>(d)] *= n;
    for (size_t i = 0; i < stride.size(); ++i) {
      if (static_cast<int64_t>(i) != d && stride[i] >= shard_stride) stride[i] *= n;
    }
  }
  return {shape, stride};
}

// Every rank gets the tensor of the mesh rank `src`: a broadcast along each mesh dim in turn,
// from src's coordinate on it.
void broadcast_from(const Tensor& t, const DeviceMesh& mesh, int src) {
  std::vector<int64_t> coord(static_cast<size_t>(mesh.ndim()));
  int64_t rest = src;
  for (int64_t m = mesh.ndim() - 1; m >= 0; --m) {
    coord[static_cast<size_t>(m)] = rest % mesh.size(m);
    rest /= mesh.size(m);
  }
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    mesh.get_group(m)->broadcast(t, static_cast<int>(coord[static_cast<size_t>(m)]))->wait();
  }
}

}  // namespace

namespace dtensor {

DTensorMeta& meta_of(const Tensor& t) {
  TS_INTERNAL_ASSERT(t.is_distributed(), "meta_of on a plain tensor");
  return static_cast<DTensorMeta&>(*t.unsafe_impl()->dist_meta);
}

Tensor make_distributed(Tensor local, std::shared_ptr<const DTensorSpec> spec,
                        dist::WorkPtr pending, std::vector<Tensor> keep_alive) {
  TS_INTERNAL_ASSERT(local.defined() && spec != nullptr, "make_distributed without data");
  TS_INTERNAL_ASSERT(local.dtype() == spec->dtype, "local dtype ", local.dtype(), " != spec dtype ",
                     spec->dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = local.storage();
  impl->sizes = spec->shape;
  impl->strides = spec->stride;
  impl->dtype = spec->dtype;
  impl->refresh_contiguous();
  auto meta = std::make_shared<DTensorMeta>();
  meta->local = std::move(local);
  meta->spec = std::move(spec);
  meta->pending = std::move(pending);
  meta->keep_alive = std::move(keep_alive);
  impl->dist_meta = std::move(meta);
  return Tensor(std::move(impl));
}

const Tensor& ready_local(const Tensor& t) {
  DTensorMeta& m = meta_of(t);
  if (m.pending != nullptr) {
    m.pending->wait();
    m.pending = nullptr;
    m.keep_alive.clear();
  }
  return m.local;
}

}  // namespace dtensor

DTensor::DTensor(const Tensor& t) : Tensor(t) {
  TS_CHECK(!t.defined() || t.is_distributed(), "[DTensor] a plain tensor (shape ", t.sizes(),
           ") is not a DTensor; make one with distribute_tensor or DTensor::from_local");
  TS_CHECK(spmd::detail::typed_meta(t) == nullptr, "[DTensor] a local SPMD-typed tensor (shape ",
           t.sizes(),
           ", inside local_map with spmd_types=true) is not a DTensor; local_map makes "
           "DTensors of the function's outputs");
}

DTensor::DTensor(Tensor local, std::shared_ptr<const DTensorSpec> spec, dist::WorkPtr pending,
                 std::vector<Tensor> keep_alive)
    : Tensor(dtensor::make_distributed(std::move(local), std::move(spec), std::move(pending),
                                       std::move(keep_alive))) {}

const DTensorSpec& DTensor::spec() const { return *spec_ptr(); }

const std::shared_ptr<const DTensorSpec>& DTensor::spec_ptr() const {
  TS_CHECK(defined(), "[DTensor] operation on an undefined DTensor");
  return dtensor::meta_of(*this).spec;
}

const Tensor& DTensor::unsafe_local() const { return dtensor::meta_of(*this).local; }

DTensor DTensor::from_local(const Tensor& local, const DeviceMesh& mesh,
                            const Placements& placements, FromLocalOptions options) {
  TS_CHECK(local.defined(), "[DTensor.from_local] undefined local tensor");
  const Placements ps = normalize_placements("DTensor.from_local", placements, mesh, local.dim());
  TS_CHECK(options.shape.has_value() == options.stride.has_value(),
           "[DTensor.from_local] got only one of shape and stride; please pass both shape and "
           "stride at the same time, or neither");
  if (options.grad_placements.has_value()) {
    options.grad_placements =
        normalize_placements("DTensor.from_local", *options.grad_placements, mesh, local.dim());
  }
  auto spec = std::make_shared<DTensorSpec>(DTensorSpec{mesh, ps, {}, {}, local.dtype()});
  if (options.shape.has_value()) {
    TS_CHECK(options.shape->size() == static_cast<size_t>(local.dim()),
             "[DTensor.from_local] shape ", *options.shape, " has ", options.shape->size(),
             " dims but the local tensor has ", local.dim());
    spec->shape = *options.shape;
    spec->stride = *options.stride;
    const Shape expected = spec->local_shape();
    TS_CHECK_SHAPE(expected == local.sizes(), "[DTensor.from_local] local tensor of shape ",
                   local.sizes(), " is not this rank's shard of global shape ", spec->shape,
                   " under ", ps, " (expected ", expected, ")");
  } else {
    std::tie(spec->shape, spec->stride) = global_from_local(local, mesh, ps);
  }
  if (options.grad_placements.has_value()) {
    options.grad_placements =
        normalize_placements("DTensor.from_local", *options.grad_placements, mesh, local.dim());
    check_hint("DTensor.from_local", *spec, *options.grad_placements);
  }
  if (options.run_check) {
    // `spec->shape` was given (and this rank's local shape checked against it) or inferred
    // from the local shape, so comparing it covers the local shapes too.
    dtensor::check_metadata_agreement(
        "DTensor.from_local", {{"the local tensor", local.dtype(), local.sizes(), spec->shape}},
        mesh,
        "inconsistent tensor metadata across ranks (run_check); without an explicit shape every "
        "rank must hold an even shard");
    // As PyTorch: coordinate 0's data is broadcast into `local` itself along Replicate dims.
    NoGradGuard no_grad;
    for (size_t m = 0; m < ps.size(); ++m) {
      if (ps[m].is_replicate())
        mesh.get_group(static_cast<int64_t>(m))->broadcast(local, 0)->wait();
    }
  }
  Tensor data = local;
  if (is_grad_enabled() && data.requires_grad()) {
    data = dtensor::from_local_identity(data, spec, options.grad_placements);
  }
  return DTensor(std::move(data), std::move(spec));
}

Tensor DTensor::to_local(ToLocalOptions options) const {
  const Tensor& local = dtensor::ready_local(*this);
  if (!is_grad_enabled() || !local.requires_grad()) return local;
  if (options.grad_placements.has_value()) {
    options.grad_placements =
        normalize_placements("DTensor.to_local", *options.grad_placements, device_mesh(), ndim());
  }
  return dtensor::to_local_identity(local, spec_ptr(), options.grad_placements);
}

Tensor DTensor::full_tensor(ToLocalOptions options) const {
  return redistribute(Placements(static_cast<size_t>(device_mesh().ndim()), Replicate()))
      .to_local(std::move(options));
}

DTensor DTensor::redistribute(const Placements& placements, RedistributeOptions options) const {
  const Tensor& local = dtensor::ready_local(*this);
  const Placements dst =
      normalize_placements("DTensor.redistribute", placements, device_mesh(), ndim());
  auto out_spec = std::make_shared<DTensorSpec>(spec());
  out_spec->placements = dst;
  if (options.forward_dtype.has_value()) out_spec->dtype = *options.forward_dtype;
  dtensor::ExecuteResult pending;
  Tensor out = dtensor::redistribute_local(local, spec_ptr(), dst, options, &pending);
  if (options.async_op && pending.pending != nullptr) {
    return DTensor(std::move(out), std::move(out_spec), std::move(pending.pending),
                   std::move(pending.keep_alive));
  }
  return DTensor(std::move(out), std::move(out_spec));
}

DTensor DTensor::redistribute(const DeviceMesh& mesh, const Placements& placements,
                              RedistributeOptions options) const {
  TS_CHECK(mesh == device_mesh(), "[DTensor.redistribute] cross-mesh redistribute is not ",
           "supported: the DTensor is on ", device_mesh(), " and the target mesh is ", mesh);
  return redistribute(placements, std::move(options));
}

const DTensor& DTensor::wait() const {
  dtensor::ready_local(*this);
  return *this;
}

std::vector<ChunkMeta> DTensor::chunk_list() const {
  const auto runs = spec().global_runs(spec().coordinate());
  std::vector<ChunkMeta> chunks{ChunkMeta{}};
  for (size_t d = 0; d < runs.size(); ++d) {
    std::vector<ChunkMeta> next;
    std::vector<dtensor::Run> dim_runs = runs[d];
    if (dim_runs.empty()) dim_runs.push_back(dtensor::Run{shape()[d], 0});
    for (const ChunkMeta& c : chunks) {
      for (const dtensor::Run& r : dim_runs) {
        ChunkMeta n = c;
        n.offsets.push_back(r.size == 0 ? shape()[d] : r.offset);
        n.sizes.push_back(r.size);
        next.push_back(std::move(n));
      }
    }
    chunks = std::move(next);
  }
  return chunks;
}

const DTensor& DTensor::requires_grad_(bool requires_grad) const {
  Tensor::requires_grad_(requires_grad);
  return *this;
}

DTensor DTensor::grad() const { return DTensor(Tensor::grad()); }

void DTensor::backward(const DTensor& gradient, BackwardOptions options) const {
  Tensor::backward(gradient, options);
}

std::ostream& operator<<(std::ostream& os, const DTensor& t) {
  if (!t.defined()) return os << "DTensor(undefined)";
  return os << "DTensor(shape " << t.shape() << ", " << t.dtype() << ", " << t.placements() << ", "
            << t.device_mesh() << ", local " << t.unsafe_local().sizes() << ")";
}

DTensor distribute_tensor(const Tensor& tensor, const DeviceMesh& mesh, Placements placements,
                          std::optional<int> src_data_rank) {
  TS_CHECK(tensor.defined(), "[distribute_tensor] undefined tensor");
  if (placements.empty()) placements.assign(static_cast<size_t>(mesh.ndim()), Replicate());
  const Placements ps = normalize_placements("distribute_tensor", placements, mesh, tensor.dim());
  auto spec = std::make_shared<DTensorSpec>(
      DTensorSpec{mesh, ps, tensor.sizes(), contiguous_strides(tensor.sizes()), tensor.dtype()});
  Tensor local;
  {
    NoGradGuard no_grad;
    Tensor source = tensor.detach().contiguous();
    if (src_data_rank.has_value()) {
      TS_CHECK(*src_data_rank >= 0 && *src_data_rank < mesh.size(), "[distribute_tensor] ",
               "src_data_rank ", *src_data_rank, " is not a rank of the mesh (0 to ",
               mesh.size() - 1, ")");
      if (source.is_alias_of(tensor)) source = source.clone();
      // Ranks distributing different shapes (a module built differently per rank) are told so,
      // naming this call, not only a broadcast's element counts (Note [Who issues a collective]).
      const dist::detail::CallContext context = dist::detail::make_call_context(
          fmt::format("distribute_tensor|{}|{}|{}|{}|{}", fmt::join(mesh.shape(), ","),
                      fmt::join(tensor.sizes(), ","), static_cast<int>(tensor.dtype()),
                      to_string(ps), *src_data_rank),
          fmt::format("distribute_tensor of a {} tensor of shape {} to {}",
                      dtype_name(tensor.dtype()), tensor.sizes(), to_string(ps)));
      const dist::detail::CallContextScope scope(context);
      broadcast_from(source, mesh, *src_data_rank);
    }
    const std::vector<int64_t> coord = spec->coordinate();
    const auto runs = spec->global_runs(coord);
    local = source;
    for (size_t d = 0; d < runs.size(); ++d) {
      local = dtensor::assemble_runs(static_cast<int64_t>(d), runs[d],
                                     {dtensor::RunSource{local, {dtensor::Run{0, local.size(d)}}}});
    }
    local = local.is_alias_of(tensor) ? local.clone() : local.contiguous();
    for (size_t m = 0; m < ps.size(); ++m) {
      if (ps[m].is_partial(dist::ReduceOp::Sum) && coord[m] != 0) local = zeros_like(local);
      if (ps[m].is_partial() && !ps[m].is_partial(dist::ReduceOp::Sum) &&
          !ps[m].is_partial(dist::ReduceOp::Avg) && !ps[m].is_partial(dist::ReduceOp::Min) &&
          !ps[m].is_partial(dist::ReduceOp::Max)) {
        TS_CHECK(false, "[distribute_tensor] ", ps[m], " cannot be made from a full tensor; only ",
                 "sum, avg, min and max partials can");
      }
    }
  }
  if (tensor.requires_grad()) local.requires_grad_();
  return DTensor(std::move(local), std::move(spec));
}

}  // namespace tessera
