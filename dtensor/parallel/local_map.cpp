#include "tessera/dtensor/parallel/local_map.h"

#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/metadata_agreement.h"
#include "tessera/dtensor/spmd_types/local_types.h"

namespace tessera {

namespace {

using spmd::LocalType;
using spmd::LocalTypes;

// ---- spmd_types at the boundary (the seed's helpers) ----

// _valid_grad_placements.
const char* valid_grad_placements(const Placement& p) {
  if (p.is_replicate()) return "Partial (R) or Replicate (I)";
  if (p.is_partial()) return "Replicate (P)";
  return "Shard (V)";
}

// _dtensor_placement_if_compatible: the placement a value of local type `t` may have where
// `p` is asked for (V: a Shard or a Partial as given; R and I: Replicate; P: Partial).
std::optional<Placement> placement_if_compatible(LocalType t, const Placement& p) {
  switch (t) {
    case LocalType::kV:
      if (p.is_shard() || p.is_partial()) return p;
      return std::nullopt;
    case LocalType::kP:
      return Partial();
    default:
      return Replicate();
  }
}

bool same_kind(const std::optional<Placement>& a, const Placement& b) {
  return a.has_value() && a->kind() == b.kind();
}

// _placements_to_spmd_type: Shard -> V, Replicate -> I when its gradient is Replicate else R,
// Partial -> P, each checked against its gradient placement.
LocalTypes placements_to_types(size_t idx, const Placements& placements,
                               const std::optional<Placements>& grad_placements) {
  TS_CHECK(!grad_placements.has_value() || grad_placements->size() == placements.size(),
           "[local_map] in_grad_placements ", to_string(*grad_placements), " of input ", idx,
           " has ", grad_placements->size(), " placements for a mesh of ", placements.size(),
           " dims");
  LocalTypes types;
  for (size_t m = 0; m < placements.size(); ++m) {
    const Placement& p = placements[m];
    const std::optional<Placement> grad_p = grad_placements.has_value()
                                                ? std::optional<Placement>((*grad_placements)[m])
                                                : std::nullopt;
    // StridedShard (a Shard in torch, but not type(p) is Shard) and Partial of another reduce
    // op than spmd_types' pending sum have no local type.
    TS_CHECK(
        p.kind() == PlacementKind::Shard || p.is_replicate() || p.is_partial(dist::ReduceOp::Sum),
        "[local_map] local_map(spmd_types=true) does not support placement type ",
        p.is_partial() ? "Partial" : "StridedShard", ": ", p.to_string(), " (input ", idx,
        ", mesh dim ", m, ")");
    LocalType t = LocalType::kP;
    if (p.is_shard()) {
      t = LocalType::kV;
    } else if (p.is_replicate()) {
      t = grad_p.has_value() && grad_p->is_replicate() ? LocalType::kI : LocalType::kR;
    }
    if (grad_p.has_value()) {
      TS_CHECK(same_kind(placement_if_compatible(spmd::backward_type(t), *grad_p), *grad_p),
               "[local_map] local_map(spmd_types=true) cannot represent this forward/backward "
               "placement pair:\nin_placements=",
               p.to_string(), ", in_grad_placements=", grad_p->to_string(), " (input ", idx,
               ", mesh dim ", m,
               ").\n\nThe local_map boundary assigns one SPMD type to each local tensor, which "
               "also fixes the expected backward placement. For in_placements=",
               p.to_string(), ", valid grad placements are ", valid_grad_placements(p),
               ".\n\nIf the forward and backward layouts intentionally diverge in a way not "
               "represented by one SPMD type, expand the local_map region to include that "
               "divergence, so the local_map region boundary respects tied FWD-BWD typing.");
    }
    types.push_back(t);
  }
  return types;
}

// The gradient placements a typed input's local tensor gets without an in_grad_placements
// entry: those of its backward types, so R's gradient, a per-rank part (P), is Partial and
// to_local's backward sums it. (The seed types such an input R but keeps to_local's default,
// Replicate, which would take each rank's part for the whole gradient: notes section 8,
// "observed inconsistency".)
Placements grad_placements_of(const Placements& placements, const LocalTypes& types) {
  Placements grad;
  for (size_t m = 0; m < placements.size(); ++m) {
    grad.push_back(*placement_if_compatible(spmd::backward_type(types[m]), placements[m]));
  }
  return grad;
}

// The local tensor fn sees for argument `idx`, a DTensor, after the placement checks; typed
// (Note [Local SPMD types]) with spmd_types when in_placements gives its placements.
Tensor local_argument(const Tensor& arg, size_t idx, const LocalMapOptions& o) {
  DTensor d(arg);
  if (o.in_placements.has_value()) {
    const std::optional<Placements>& spec = (*o.in_placements)[idx];
    TS_CHECK(spec.has_value(), "[local_map] DTensor input ", idx, " (", to_string(d.placements()),
             ") expects placements but received None (nullopt)!");
    if (d.placements() != *spec) {
      TS_CHECK(o.redistribute_inputs, "[local_map] arg ", idx,
               " in local_map has a mismatched placements: arg placements is ",
               to_string(d.placements()), " but the input placements is ", to_string(*spec),
               "! If redistribute_inputs is wanted, set redistribute_inputs=true to local_map.");
      d = d.redistribute(*spec);
    }
  }
  if (o.in_grad_placements.has_value()) {
    TS_CHECK(idx < o.in_grad_placements->size(), "[local_map] in_grad_placements has ",
             o.in_grad_placements->size(), " entries for input ", idx);
    const std::optional<Placements>& spec = (*o.in_grad_placements)[idx];
    TS_CHECK(spec.has_value(), "[local_map] DTensor input ", idx,
             " expects in grad placements but received None (nullopt)!");
  }
  const std::optional<Placements> grad =
      o.in_grad_placements.has_value() ? (*o.in_grad_placements)[idx] : std::nullopt;
  if (!o.spmd_types || !o.in_placements.has_value()) {
    return grad.has_value() ? d.to_local({.grad_placements = *grad}) : d.to_local();
  }
  LocalTypes types = placements_to_types(idx, d.placements(), grad);
  const Tensor local =
      d.to_local({.grad_placements = grad.value_or(grad_placements_of(d.placements(), types))});
  return spmd::detail::make_typed(local, std::move(types), d.device_mesh());
}

// _out_spmd_types_to_grad_placements: checks each output's local types against its
// out_placements and returns the placements of its gradient (P or V -> R -> Replicate, R -> P ->
// Partial, I -> I -> Replicate, V -> V -> the Shard of out_placements; V as Partial -> Replicate).
std::vector<std::optional<Placements>> out_grad_placements(const std::vector<Tensor>& out,
                                                           const LocalMapOptions& o,
                                                           const DeviceMesh& mesh) {
  std::vector<std::optional<Placements>> grads(out.size());
  for (size_t i = 0; i < out.size() && i < o.out_placements.size(); ++i) {
    const std::optional<Placements>& spec = o.out_placements[i];
    TS_CHECK(!spec.has_value() || out[i].defined(), "[local_map] out_placements specifies ",
             to_string(*spec), " but the corresponding output ", i, " is not a Tensor");
    TS_CHECK(spec.has_value() || !out[i].defined(),
             "[local_map] out_placements has None (nullopt) for a Tensor output (output ", i,
             "). Provide placements for Tensor outputs and use None only for non-Tensor "
             "outputs.");
    if (!spec.has_value() || (out[i].is_distributed() && !spmd::local_types(out[i]))) continue;
    const std::optional<LocalTypes> types = spmd::local_types(out[i]);
    TS_CHECK(types.has_value(), "[local_map] Output tensor ", i,
             " has no spmd_types annotation but out_placements expects one. Ensure the "
             "function's output is derived from annotated inputs or is explicitly annotated "
             "(spmd::assert_type).");
    TS_CHECK(static_cast<int64_t>(spec->size()) == mesh.ndim(), "[local_map] out_placements ",
             to_string(*spec), " of output ", i, " has ", spec->size(),
             " placements for a mesh of ", mesh.ndim(), " dims");
    Placements grad;
    for (size_t m = 0; m < spec->size(); ++m) {
      const Placement& p = (*spec)[m];
      const LocalType actual = (*types)[m];
      TS_CHECK(same_kind(placement_if_compatible(actual, p), p),
               "[local_map] Output tensor placement mismatch on ",
               spmd::detail::mesh_dim_name(mesh, static_cast<int64_t>(m)), " (output ", i,
               "): out_placements=", p.to_string(), " but spmd_types inferred ",
               spmd::to_string(actual));
      if (actual == LocalType::kV && p.is_partial()) {
        grad.push_back(Replicate());
      } else {
        grad.push_back(*placement_if_compatible(spmd::backward_type(actual), p));
      }
    }
    grads[i] = std::move(grad);
  }
  return grads;
}

// from_local infers each output's global shape from this rank's local shape (even shards), so
// a fn whose outputs differ per rank would leave ranks disagreeing on a DTensor, to be found by
// a later collective of unequal sizes; said here instead, naming local_map and the output.
void check_outputs_agree(const std::vector<Tensor>& out, const DeviceMesh& mesh) {
  std::vector<dtensor::TensorMetadata> entries;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_distributed()) continue;
    const DTensor d(out[i]);
    entries.push_back({"output " + std::to_string(i) + " (" + to_string(d.placements()) + ")",
                       d.dtype(), d.unsafe_local().sizes(), d.sizes()});
  }
  dtensor::check_metadata_agreement(
      "local_map", entries, mesh,
      "fn must return, on every rank, outputs of one dtype whose local shapes are the even shards "
      "of one global shape under out_placements (or set check_outputs = false to skip this "
      "check)");
}

std::vector<Tensor> wrap_outputs(std::vector<Tensor> out, const LocalMapOptions& o,
                                 const DeviceMesh& mesh,
                                 const std::vector<std::optional<Placements>>& grads) {
  TS_CHECK(out.size() == o.out_placements.size(),
           "[local_map] local_map requires one PlacementType be provided for each output value, "
           "received ",
           o.out_placements.size(), " out_placements but ", out.size(), " is expected!");
  for (size_t i = 0; i < out.size(); ++i) {
    const std::optional<Placements>& spec = o.out_placements[i];
    if (!out[i].defined()) {
      TS_CHECK(!spec.has_value(), "[local_map] Non-tensor output ", i,
               " expects None placements but received ", to_string(*spec), "!");
      continue;
    }
    if (!grads.empty() && spmd::local_types(out[i]).has_value()) {
      out[i] = DTensor::from_local(spmd::detail::typed_local(out[i]), mesh, *spec,
                                   {.grad_placements = grads[i]});
      continue;
    }
    TS_CHECK(!out[i].is_distributed(), "[local_map] torch.Tensor output expected but output ", i,
             " is a DTensor (", to_string(DTensor(out[i]).placements()), ")");
    if (spec.has_value()) out[i] = DTensor::from_local(out[i], mesh, *spec);
  }
  if (o.check_outputs) check_outputs_agree(out, mesh);
  return out;
}

}  // namespace

LocalFn local_map(LocalFn fn, LocalMapOptions options) {
  TS_CHECK(fn != nullptr, "[local_map] fn is empty");
  return [fn = std::move(fn), o = std::move(options)](const std::vector<Tensor>& args) {
    if (o.in_placements.has_value()) {
      TS_CHECK(o.in_placements->size() == args.size(), "[local_map] in_placements length ",
               o.in_placements->size(), " does not match the number of input args ", args.size(),
               "!");
    }
    std::optional<DeviceMesh> mesh = o.device_mesh;
    bool seen_dtensor = false;
    std::vector<Tensor> locals;
    locals.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const Tensor& arg = args[i];
      if (arg.is_distributed()) {
        if (!mesh.has_value()) mesh = DTensor(arg).device_mesh();
        seen_dtensor = true;
        locals.push_back(local_argument(arg, i, o));
        continue;
      }
      // A plain tensor passes whatever its entry says (the seed skips the check for tensors);
      // a non-tensor argument must have none.
      if (!arg.defined() && o.in_placements.has_value()) {
        const std::optional<Placements>& spec = (*o.in_placements)[i];
        TS_CHECK(!spec.has_value(), "[local_map] Non-Tensor input ", i,
                 " expects None placements but received ", to_string(*spec), "!");
      }
      locals.push_back(arg);
    }
    if (!seen_dtensor) return fn(locals);
    if (!o.spmd_types) return wrap_outputs(fn(locals), o, *mesh, {});
    std::vector<Tensor> out;
    {
      const spmd::detail::CurrentMeshGuard current(*mesh);
      out = fn(locals);
    }
    const std::vector<std::optional<Placements>> grads = out_grad_placements(out, o, *mesh);
    return wrap_outputs(std::move(out), o, *mesh, grads);
  };
}

}  // namespace tessera
