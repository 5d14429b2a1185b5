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

// Where a plan file's entry comes from, for its errors.
struct PlanLine {
  int number = 0;
  std::string where;  // "plan.txt:3"
  std::string text;   // the line as written, comment and outer blanks cut
};

struct Strategy {
  StrategyKind kind = StrategyKind::Single;
  std::string name;
  Shape mesh_shape;                            // empty for Single
  std::vector<std::string> dim_names;          // "dp" / "tp"
  std::map<std::string, ParallelStyle> plan;   // for Plan
  std::map<std::string, PlanLine> plan_lines;  // for Plan from a file: each key's line
};

// Errors when `s` would not train `c` as one device does: FSDP and FSDP x TP give each
// data-parallel rank an equal share of the batch's rows (sequences; the MLP's batch x seq rows)
// and average the ranks' losses and gradients, so their data-parallel degree must divide them.
// (DP shards the batch as a DTensor, evenly or not, and trains as one device does.)
void check_fits(const Strategy& s, const ModelConfig& c);

// Strategy by name ("single", "dp", "tp", "sp", "fsdp", "fsdp_tp") for `ranks` ranks (fsdp_tp:
// dp = 2 when ranks is even). Errors: an unknown name, ranks < 2 or fsdp_tp with odd ranks.
Strategy strategy_named(const std::string& name, int64_t ranks);
// A plan file: one "path style" per line ('#' comments), style colwise | rowwise | sequence,
// optionally followed by "dtensor" (keep the output a DTensor). Errors name the file and line:
// an unknown style or option, a word after them, a path given twice (naming both lines), no entry.
Strategy plan_from_file(const std::string& path, int64_t ranks);

// Checks that a plan from a file applies to `c`'s model, before any run; every error names the
// plan line. First against the model's modules (built once): a path that matches no submodule
// (the error lists them), a module two lines match, colwise or rowwise on a module that is not a
// Linear or an Embedding, colwise with a plain-tensor output (no "dtensor") on a width the ranks
// do not divide (the next module takes equal shards). Then one step under the plan on its rank
// threads (Note [Plan errors name a line]): an error in it names the line of the planned module
// it happened in, else of the last planned module that ran before it.
void check_plan(const Strategy& s, const ModelConfig& c);

// The submodule paths a plan file can name in `c`'s model, each with its module kind, one a line
// (each block's once: "blocks.*.wq"), and the grammar of a plan line: --list-modules's text.
std::string module_list(const ModelConfig& c);

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
