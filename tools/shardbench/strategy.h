#pragma once
// The sharding strategies tessera-shardbench runs, applied to a model on the calling rank: single
// device, DP (replicated parameters, batch-sharded DTensor data), TP (the model's tensor-parallel
// plan), SP (its sequence-parallel plan), FSDP (fully_shard per unit, then the root) and
// FSDP x TP (2-D mesh "dp" x "tp"), or an explicit plan read from a file.

#include <tessera/tessera.h>

#include <map>
#include <string>
#include <vector>

#include "tools/shardbench/model.h"

namespace tessera::shardbench {

enum class StrategyKind { Single, DP, TP, SP, FSDP, FSDP_TP, Plan };

struct Strategy {
  StrategyKind kind = StrategyKind::Single;
  std::string name;
  Shape mesh_shape;                           // empty for Single
  std::vector<std::string> dim_names;         // "dp" / "tp"
  std::map<std::string, ParallelStyle> plan;  // for Plan
};

// Strategy by name ("single", "dp", "tp", "sp", "fsdp", "fsdp_tp") for `ranks` ranks (fsdp_tp:
// dp = 2 when ranks is even). Errors: an unknown name, ranks < 2 or fsdp_tp with odd ranks.
Strategy strategy_named(const std::string& name, int64_t ranks);
// A plan file: one "path style" per line ('#' comments), style colwise | rowwise | sequence,
// optionally followed by "dtensor" (keep the output a DTensor). Errors name the file and line.
Strategy plan_from_file(const std::string& path, int64_t ranks);

// This rank's model input and target after sharding `model` for `s` on `mesh`.
struct RankData {
  Tensor input;
  Tensor target;
  bool loss_parallel = false;
};
RankData apply_strategy(const Strategy& s, const ModelConfig& c, nn::Module& model,
                        const DeviceMesh& mesh, const Batch& batch);

// The whole batch's loss from this rank's loss (a collective where the ranks hold parts).
double whole_loss(const Strategy& s, const Tensor& loss, const DeviceMesh& mesh);

}  // namespace tessera::shardbench
