#pragma once
// Tensor and sequence parallelism for modules (torch.distributed.tensor.parallel): parallel
// styles, and parallelize_module to apply them by submodule path. Layouts are for a 1-D mesh, as
// in PyTorch (pass mesh["tp"] of a larger mesh).
//
// Defaults, as PyTorch's:
//   ColwiseParallel   Linear weight/bias Shard(0), Embedding weight Shard(1); input Replicate,
//                     output Shard(-1).
//   RowwiseParallel   Linear weight Shard(1), bias Replicate, Embedding weight Shard(0); input
//                     Shard(-1) for Linear and Replicate for Embedding, output Replicate (the
//                     Partial result reduced by all_reduce; an output layout Shard(d) reduces
//                     by reduce_scatter).
//   SequenceParallel  parameters Replicate; input Shard(sequence_dim), output as computed
//                     (Shard(sequence_dim) for norms and dropout), kept a DTensor.
//   PrepareModuleInput / PrepareModuleOutput: a plain input (output) is taken to have
//                     input_layouts (output_layouts) and is redistributed to the desired one.
// use_local_output returns the output's local tensor (a plain Tensor).

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tessera/autograd/nn/module.h"
#include "tessera/dtensor/device_mesh.h"
#include "tessera/dtensor/placement.h"

namespace tessera {

struct ColwiseParallel {
  std::optional<Placement> input_layouts = std::nullopt, output_layouts = std::nullopt;
  bool use_local_output = true;
};
struct RowwiseParallel {
  std::optional<Placement> input_layouts = std::nullopt, output_layouts = std::nullopt;
  bool use_local_output = true;
};
struct SequenceParallel {
  int64_t sequence_dim = 1;
  bool use_local_output = false;
};
struct PrepareModuleInput {
  std::optional<Placement> input_layouts = std::nullopt, desired_input_layouts = std::nullopt;
  bool use_local_output = false;
};
struct PrepareModuleOutput {
  std::optional<Placement> output_layouts = std::nullopt, desired_output_layouts = std::nullopt;
  bool use_local_output = true;
};
using ParallelStyle = std::variant<ColwiseParallel, RowwiseParallel, SequenceParallel,
                                   PrepareModuleInput, PrepareModuleOutput>;

// Applies each style of `plan` to the submodules its key names: a dotted path as
// named_modules() gives it ("layers.0.mlp.up"), where '*' matches any one name ("layers.*.up").
// Returns `module`. Errors: a mesh that is not 1-D, a key that matches no submodule (the error
// lists the module's paths), a style on a module it cannot shard (naming both).
nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const std::map<std::string, ParallelStyle>& plan);
// Applies `style` to `module` itself.
nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const ParallelStyle& style);

namespace detail {
// How parallelize_module reads its keys, for tools that check plans against a model: a dotted
// path split at the dots, and whether a split key names `path` ('*' matches any one name).
std::vector<std::string> split_module_path(const std::string& path);
bool plan_key_matches(const std::vector<std::string>& key, const std::string& path);
}  // namespace detail

}  // namespace tessera
