#include "tessera/dtensor/parallel/parallelize.h"

#include <sstream>
#include <tuple>
#include <vector>

#include "tessera/autograd/nn/embedding.h"
#include "tessera/autograd/nn/linear.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/dtensor_functions.h"
#include "tessera/dtensor/dtensor_meta.h"
#include "tessera/dtensor/parallel/distribute_module.h"
#include "tessera/dtensor/spmd_types/checker.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera {

namespace {

// Shard(-1) and friends, for a tensor of `ndim` dims.
Placement resolved(const Placement& p, int64_t ndim) {
  if (p.is_shard() && !p.is_strided_shard() && p.dim() < 0) return Shard(p.dim() + ndim);
  return p;
}

// Note [One gather for inputs the styles share]
// Several modules of a plan often take the same DTensor: q, k and v read one normalized input
// under sequence parallel. Each style's input hook redistributing it again would all_gather it
// once per module and, in backward, reduce each module's Partial gradient separately (PyTorch
// does both: three all_gathers, three reduce_scatters). While autograd records, the hooks keep
// what they made beside the input it came from, valid while neither's data changed and until its
// backward ran (one forward's consumers, never a later step's): the modules then share one
// all_gather, and the engine sums their gradients, reduce_scattered once (Note [Partial
// gradients into a redistribute] in dtensor/dtensor_functions.cpp). The kept result lives as
// long as its input, and its consumers save it for backward anyway. Without autograd nothing is
// kept (an input reused across steps would otherwise skip its gathers).
Tensor shared_redistribute(const Tensor& d, const Placements& want) {
  if (!is_grad_enabled() || !d.requires_grad()) return DTensor(d).redistribute(want);
  dtensor::DTensorMeta& meta = dtensor::meta_of(d);
  const uint64_t version = meta.local.storage()->version();
  for (const auto& r : meta.shared_redistributes) {
    const Tensor& local = dtensor::meta_of(r.result).local;
    if (r.placements == want && r.version == version &&
        r.result_version == local.storage()->version() && dtensor::awaits_backward(local)) {
      return r.result;
    }
  }
  Tensor result = DTensor(d).redistribute(want);
  std::erase_if(meta.shared_redistributes, [&](const auto& r) { return r.placements == want; });
  meta.shared_redistributes.push_back(
      {want, result, version, dtensor::meta_of(result).local.storage()->version()});
  return result;
}

// A module input or output as the styles see it: a plain tensor is taken to have `layout` (each
// rank's tensor is its local shard, as PyTorch's from_local; left as is without a layout), then
// redistributed to `desired` when given; returned as its local tensor when `use_local`.
// `global_last_dim`: the global size of the last dim when the module knows it (a Linear's
// in_features), so that uneven local shards (6 features on 4 ranks: 2, 2, 2, 0) are not taken as
// even ones.
Tensor convert(const Tensor& t, const std::optional<Placement>& layout,
               const std::optional<Placement>& desired, bool use_local, const DeviceMesh& mesh,
               std::optional<int64_t> global_last_dim = std::nullopt) {
  if (!t.defined()) return t;
  Tensor d = t;
  if (!t.is_distributed()) {
    if (!layout.has_value()) return t;
    const Placement p = resolved(*layout, t.dim());
    FromLocalOptions options;
    if (global_last_dim.has_value() && t.dim() > 0 && p.is_shard() && p.dim() == t.dim() - 1) {
      Shape shape = t.sizes();
      shape.back() = *global_last_dim;
      options.stride = contiguous_strides(shape);
      options.shape = std::move(shape);
    }
    d = DTensor::from_local(t, mesh, {p}, std::move(options));
  }
  if (desired.has_value()) {
    const Placements want{resolved(*desired, d.dim())};
    if (DTensor(d).placements() != want) {
      d = t.is_distributed() && !spmd::detail::any_typed({d}) ? shared_redistribute(d, want)
                                                              : DTensor(d).redistribute(want);
    }
  }
  return use_local ? DTensor(d).to_local() : d;
}

std::string describe(const std::string& path, const nn::Module& m) {
  return (path.empty() ? std::string("the module") : "module '" + path + "'") + " (a " + m.name() +
         ")";
}

// Swaps in a DTensor for the module's own parameter `name` (when it has one).
void shard_parameter(nn::Module& m, const std::string& name, const Placement& p,
                     const DeviceMesh& mesh) {
  for (const auto& [n, t] : m.named_parameters(/*recurse=*/false)) {
    if (n == name) {
      m.register_parameter(name, detail::distribute_leaf(t, mesh, {p}), t.requires_grad());
      return;
    }
  }
}

// Colwise and Rowwise: which parameters get which placement, and the default input layout.
struct LinearLike {
  bool embedding = false;
};

LinearLike linear_like(const char* style, const std::string& path, nn::Module& m) {
  if (dynamic_cast<nn::Linear*>(&m) != nullptr) return {false};
  if (dynamic_cast<nn::Embedding*>(&m) != nullptr) return {true};
  TS_CHECK(false, "[parallelize_module] ", style, " cannot shard ", describe(path, m),
           ": it shards Linear and Embedding modules");
  return {};
}

void apply(const ColwiseParallel& s, const std::string& path, nn::Module& m,
           const DeviceMesh& mesh) {
  const LinearLike kind = linear_like("ColwiseParallel", path, m);
  const std::optional<Placement> in = s.input_layouts.value_or(Replicate());
  const std::optional<Placement> out = s.output_layouts.value_or(Shard(-1));
  distribute_module(
      m, mesh,
      [kind](const std::string&, nn::Module& mod, const DeviceMesh& msh) {
        shard_parameter(mod, "weight", Shard(kind.embedding ? 1 : 0), msh);
        shard_parameter(mod, "bias", Shard(0), msh);
      },
      [in](nn::Module&, const Tensor& x, const DeviceMesh& msh) {
        return convert(x, in, Replicate(), false, msh);
      },
      [out, local = s.use_local_output](nn::Module&, const Tensor& y, const DeviceMesh& msh) {
        return convert(y, std::nullopt, out, local, msh);
      });
}

void apply(const RowwiseParallel& s, const std::string& path, nn::Module& m,
           const DeviceMesh& mesh) {
  const LinearLike kind = linear_like("RowwiseParallel", path, m);
  const Placement default_in = kind.embedding ? Placement(Replicate()) : Placement(Shard(-1));
  const std::optional<Placement> in = s.input_layouts.value_or(default_in);
  const std::optional<Placement> out = s.output_layouts.value_or(Replicate());
  distribute_module(
      m, mesh,
      [kind](const std::string&, nn::Module& mod, const DeviceMesh& msh) {
        shard_parameter(mod, "weight", Shard(kind.embedding ? 0 : 1), msh);
      },
      [in, default_in](nn::Module& mod, const Tensor& x, const DeviceMesh& msh) {
        const auto* linear = dynamic_cast<const nn::Linear*>(&mod);
        return convert(
            x, in, default_in, false, msh,
            linear != nullptr ? std::optional<int64_t>(linear->in_features()) : std::nullopt);
      },
      [out, local = s.use_local_output](nn::Module&, const Tensor& y, const DeviceMesh& msh) {
        return convert(y, std::nullopt, out, local, msh);
      });
}

void apply(const SequenceParallel& s, const std::string&, nn::Module& m, const DeviceMesh& mesh) {
  const Placement seq = Shard(s.sequence_dim);
  distribute_module(
      m, mesh, {},
      [seq](nn::Module&, const Tensor& x, const DeviceMesh& msh) {
        return convert(x, seq, seq, false, msh);
      },
      [local = s.use_local_output](nn::Module&, const Tensor& y, const DeviceMesh& msh) {
        return convert(y, std::nullopt, std::nullopt, local, msh);
      });
}

void apply(const PrepareModuleInput& s, const std::string&, nn::Module& m, const DeviceMesh& mesh) {
  m.register_forward_pre_hook([s, mesh](nn::Module&, const Tensor& x) {
    return convert(x, s.input_layouts, s.desired_input_layouts, s.use_local_output, mesh);
  });
}

void apply(const PrepareModuleOutput& s, const std::string&, nn::Module& m,
           const DeviceMesh& mesh) {
  m.register_forward_hook([s, mesh](nn::Module&, const Tensor&, const Tensor& y) {
    return convert(y, s.output_layouts, s.desired_output_layouts, s.use_local_output, mesh);
  });
}

void check_mesh(const DeviceMesh& mesh) {
  TS_CHECK(mesh.ndim() == 1,
           "[parallelize_module] expects a 1-D mesh (the tensor-parallel mesh "
           "dim), got a ",
           mesh.ndim(), "-D mesh of shape ", mesh.shape(),
           "; pass one dim of it, e.g. mesh[\"tp\"]");
}

// What can reject a style before it changes anything: the module kinds Colwise and Rowwise shard.
void check_style(const ParallelStyle& style, const std::string& path, nn::Module& m) {
  if (std::holds_alternative<ColwiseParallel>(style)) linear_like("ColwiseParallel", path, m);
  if (std::holds_alternative<RowwiseParallel>(style)) linear_like("RowwiseParallel", path, m);
}

void apply_style(const ParallelStyle& style, const std::string& path, nn::Module& m,
                 const DeviceMesh& mesh) {
  std::visit([&](const auto& s) { apply(s, path, m, mesh); }, style);
}

}  // namespace

nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const std::map<std::string, ParallelStyle>& plan) {
  check_mesh(mesh);
  const auto modules = module.named_modules();
  // All or nothing: every key is matched and every style checked against its modules before any
  // module changes, so a rejected plan leaves the module as it was.
  std::vector<std::tuple<const ParallelStyle*, std::string, nn::Module*>> steps;
  for (const auto& [key, style] : plan) {
    const std::vector<std::string> parts = detail::split_module_path(key);
    int64_t found = 0;
    for (const auto& [path, m] : modules) {
      if (path.empty() || !detail::plan_key_matches(parts, path)) continue;
      check_style(style, path, *m);
      steps.emplace_back(&style, path, m);
      ++found;
    }
    if (found == 0) {
      std::string paths;
      for (const auto& entry : modules) {
        if (!entry.first.empty()) paths += (paths.empty() ? "" : ", ") + entry.first;
      }
      TS_CHECK(false, "[parallelize_module] plan key '", key, "' matches no submodule of this ",
               module.name(), "; its submodules are: ", paths.empty() ? "(none)" : paths,
               " (nothing was changed)");
    }
  }
  for (const auto& [style, path, m] : steps) apply_style(*style, path, *m, mesh);
  return module;
}

std::vector<std::string> detail::split_module_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(path);
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

bool detail::plan_key_matches(const std::vector<std::string>& key, const std::string& path) {
  const std::vector<std::string> parts = split_module_path(path);
  if (parts.size() != key.size()) return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (key[i] != "*" && key[i] != parts[i]) return false;
  }
  return true;
}

nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const ParallelStyle& style) {
  check_mesh(mesh);
  apply_style(style, "", module, mesh);
  return module;
}

}  // namespace tessera
