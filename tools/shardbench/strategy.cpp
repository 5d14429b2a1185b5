#include "tools/shardbench/strategy.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tessera::shardbench {

namespace {

Tensor rows_of(const Tensor& t, int64_t parts, int64_t index) {
  return t.narrow(0, index * t.size(0) / parts, t.size(0) / parts);
}

void fully_shard_units(const ModelConfig& c, nn::Module& model, const DeviceMesh& dp) {
  const std::vector<std::string> units = fsdp_units(c);
  for (const auto& [path, sub] : model.named_modules()) {
    if (std::find(units.begin(), units.end(), path) != units.end()) fully_shard(*sub, dp);
  }
  fully_shard(model, dp);
}

ParallelStyle style_named(const std::string& style, bool dtensor_output, const std::string& where) {
  if (style == "colwise") return ColwiseParallel{.use_local_output = !dtensor_output};
  if (style == "rowwise") return RowwiseParallel{.use_local_output = !dtensor_output};
  if (style == "sequence") return SequenceParallel{.use_local_output = !dtensor_output};
  TS_CHECK(false, "[tessera-shardbench] ", where, ": unknown style '", style,
           "'; valid: colwise, rowwise, sequence");
  return ColwiseParallel{};
}

}  // namespace

Strategy strategy_named(const std::string& name, int64_t ranks) {
  if (name == "single") return {StrategyKind::Single, "single", {}, {}, {}};
  TS_CHECK(ranks >= 2, "[tessera-shardbench] strategy '", name, "' needs --ranks >= 2, got ",
           ranks);
  if (name == "dp") return {StrategyKind::DP, "DP", {ranks}, {}, {}};
  if (name == "tp") return {StrategyKind::TP, "TP", {ranks}, {}, {}};
  if (name == "sp") return {StrategyKind::SP, "SP", {ranks}, {}, {}};
  if (name == "fsdp") return {StrategyKind::FSDP, "FSDP", {ranks}, {}, {}};
  if (name == "fsdp_tp") {
    TS_CHECK(ranks % 2 == 0, "[tessera-shardbench] fsdp_tp lays the ranks out as 2 x ranks/2; ",
             "--ranks ", ranks, " is odd");
    return {StrategyKind::FSDP_TP, "FSDP x TP", {2, ranks / 2}, {"dp", "tp"}, {}};
  }
  TS_CHECK(false, "[tessera-shardbench] unknown strategy '", name,
           "'; valid: single, dp, tp, sp, fsdp, fsdp_tp");
  return {};
}

Strategy plan_from_file(const std::string& path, int64_t ranks) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "[tessera-shardbench] cannot read plan file '", path, "'");
  Strategy s{StrategyKind::Plan, "plan " + path, {ranks}, {}, {}};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string module, style, flag;
    if (!(words >> module)) continue;
    const std::string where = path + ":" + std::to_string(number);
    TS_CHECK(static_cast<bool>(words >> style), "[tessera-shardbench] ", where,
             ": expected 'path style', got '", line, "'");
    bool dtensor_output = false;
    if (words >> flag) {
      TS_CHECK(flag == "dtensor", "[tessera-shardbench] ", where, ": unknown option '", flag,
               "'; valid: dtensor");
      dtensor_output = true;
    }
    s.plan[module] = style_named(style, dtensor_output, where);
  }
  TS_CHECK(!s.plan.empty(), "[tessera-shardbench] plan file '", path, "' has no entry");
  return s;
}

RankData apply_strategy(const Strategy& s, const ModelConfig& c, nn::Module& model,
                        const DeviceMesh& mesh, const Batch& batch) {
  switch (s.kind) {
    case StrategyKind::Single:
      return {batch.input, batch.target, false};
    case StrategyKind::DP:
      distribute_module(model, mesh);
      return {distribute_tensor(batch.input, mesh, {Shard(0)}),
              distribute_tensor(batch.target, mesh, {Shard(0)}), false};
    case StrategyKind::TP:
      parallelize_module(model, mesh, tensor_parallel_plan(c));
      return {batch.input, batch.target, uses_loss_parallel(c)};
    case StrategyKind::SP:
      parallelize_module(model, mesh, sequence_parallel_plan(c));
      if (uses_loss_parallel(c)) return {batch.input, batch.target, true};
      return {distribute_tensor(batch.input, mesh, {Shard(sequence_dim(c))}),
              distribute_tensor(batch.target, mesh, {Shard(sequence_dim(c))}), false};
    case StrategyKind::Plan:
      parallelize_module(model, mesh, s.plan);
      return {batch.input, batch.target, false};
    case StrategyKind::FSDP:
    case StrategyKind::FSDP_TP: {
      const bool two_d = s.kind == StrategyKind::FSDP_TP;
      if (two_d) parallelize_module(model, mesh["tp"], tensor_parallel_plan(c));
      const DeviceMesh dp = two_d ? mesh["dp"] : mesh;
      fully_shard_units(c, model, dp);
      const int64_t n = dp.size(), r = dp.get_local_rank(0);
      return {rows_of(batch.input, n, r), rows_of(batch.target, n, r),
              two_d && uses_loss_parallel(c)};
    }
  }
  return {};
}

double whole_loss(const Strategy& s, const Tensor& loss, const DeviceMesh& mesh) {
  const Tensor value = loss.is_distributed() ? loss.full_tensor() : loss.detach();
  if (s.kind != StrategyKind::FSDP && s.kind != StrategyKind::FSDP_TP) return value.item<double>();
  // Each data-parallel rank's loss is the mean over its equal share of the batch (mesh dim 0).
  const Tensor l = value.to(kFloat64).reshape({1}).clone();
  mesh.get_group(0)->all_reduce(l, dist::ReduceOp::Avg)->wait();
  return l.item<double>();
}

}  // namespace tessera::shardbench
