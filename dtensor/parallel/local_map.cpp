#include "dtensor/parallel/local_map.h"

#include "dtensor/dtensor.h"

namespace tessera {

namespace {

// The local tensor fn sees for argument `idx`, a DTensor, after the placement checks.
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
    return d.to_local({.grad_placements = *spec});
  }
  return d.to_local();
}

std::vector<Tensor> wrap_outputs(std::vector<Tensor> out, const LocalMapOptions& o,
                                 const DeviceMesh& mesh) {
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
    TS_CHECK(!out[i].is_distributed(), "[local_map] torch.Tensor output expected but output ", i,
             " is a DTensor (", to_string(DTensor(out[i]).placements()), ")");
    if (spec.has_value()) out[i] = DTensor::from_local(out[i], mesh, *spec);
  }
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
    TS_CHECK_T(NotSupportedError, !(o.spmd_types && seen_dtensor),
               "[local_map] spmd_types=true (checking the local SPMD types of the ops inside "
               "fn) is not available yet; run without it");
    std::vector<Tensor> out = fn(locals);
    if (!seen_dtensor) return out;
    return wrap_outputs(std::move(out), o, *mesh);
  };
}

}  // namespace tessera
