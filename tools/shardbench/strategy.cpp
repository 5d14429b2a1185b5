#include "tools/shardbench/strategy.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>
#include <variant>

#include "tools/shardbench/ranks.h"

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

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

// A plan key's line, "plan.txt:3 ('blocks.*.up colwise')", or the key where the plan has no file.
std::string line_of(const Strategy& s, const std::string& key) {
  const auto found = s.plan_lines.find(key);
  if (found == s.plan_lines.end()) return "plan key '" + key + "'";
  return found->second.where + " ('" + found->second.text + "')";
}

// The plan's keys in the order of their lines, so that the first error is the first line's.
std::vector<std::string> keys_in_file_order(const Strategy& s) {
  std::vector<std::string> keys;
  for (const auto& [key, style] : s.plan) keys.push_back(key);
  const auto number = [&](const std::string& key) {
    const auto found = s.plan_lines.find(key);
    return found == s.plan_lines.end() ? 0 : found->second.number;
  };
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return number(a) < number(b);
  });
  return keys;
}

// The model's submodule paths, each block's once ("blocks.*.wq" for every layer's), with the
// kind of module each names.
std::vector<std::pair<std::string, std::string>> plan_paths(
    const std::vector<std::pair<std::string, nn::Module*>>& modules) {
  std::vector<std::pair<std::string, std::string>> paths;
  for (const auto& [path, m] : modules) {
    if (path.empty()) continue;
    const std::vector<std::string> parts = tessera::detail::split_module_path(path);
    std::string shown = parts[0];
    for (size_t i = 1; i < parts.size(); ++i) {
      const bool index = parts[i].find_first_not_of("0123456789") == std::string::npos;
      shown += '.';
      shown += index ? std::string_view("*") : std::string_view(parts[i]);
    }
    const auto seen = [&](const auto& p) { return p.first == shown; };
    if (std::none_of(paths.begin(), paths.end(), seen)) paths.emplace_back(shown, m->name());
  }
  return paths;
}

std::string module_paths(const std::vector<std::pair<std::string, nn::Module*>>& modules) {
  std::string text;
  for (const auto& [path, kind] : plan_paths(modules)) text += (text.empty() ? "" : ", ") + path;
  return text;
}

// A module colwise and rowwise can shard, and the width colwise splits in it: a Linear's output
// features (weight rows), an Embedding's dimension (weight columns).
struct ShardedModule {
  const char* kind = nullptr;  // nullptr: neither
  int64_t colwise_width = 0;   // what colwise splits
  const char* colwise_what = "";
};
ShardedModule sharded_module(nn::Module& m) {
  if (const auto* linear = dynamic_cast<nn::Linear*>(&m)) {
    return {"Linear", linear->out_features(), "output features"};
  }
  if (dynamic_cast<nn::Embedding*>(&m) != nullptr) {
    for (const auto& [name, weight] : m.named_parameters(/*recurse=*/false)) {
      if (name == "weight") return {"Embedding", weight.size(1), "embedding dims"};
    }
  }
  return {};
}

// Colwise and rowwise shard Linear and Embedding modules only. A colwise shard left as a plain
// tensor (no "dtensor") is taken by the module that reads it as an equal part of the whole
// (DTensor::from_local), so an uneven split would read as a wrong global size there.
void check_style_fits(const ParallelStyle& style, const std::string& path, nn::Module& m,
                      int64_t ranks, const std::string& where) {
  const auto* colwise = std::get_if<ColwiseParallel>(&style);
  if (colwise == nullptr && !std::holds_alternative<RowwiseParallel>(style)) return;
  const char* name = colwise != nullptr ? "colwise" : "rowwise";
  const ShardedModule sharded = sharded_module(m);
  TS_CHECK(sharded.kind != nullptr, "[tessera-shardbench] ", where, ": ", name,
           " shards a Linear or an Embedding, and '", path, "' is a ", m.name(),
           "; valid: a path to a Linear or an Embedding, or the style sequence");
  if (colwise == nullptr || !colwise->use_local_output) return;
  TS_CHECK(sharded.colwise_width % ranks == 0, "[tessera-shardbench] ", where,
           ": colwise splits the ", sharded.colwise_width, " ", sharded.colwise_what, " of '", path,
           "' (a ", sharded.kind, ") into ", ranks, " plain-tensor shards, and --ranks ", ranks,
           " does not divide ", sharded.colwise_width,
           "; valid: --ranks dividing it, or 'dtensor' to keep the output a DTensor");
}

// Note [Plan errors name a line]
// A plan that applies can still fail in its first step: a colwise output left local that the
// next module reads whole ([Linear] expected input of shape ...), sharded logits into the loss
// ([cross_entropy] ...). Such an error is about the layout a line chose, so one step runs before
// the measured run and its error is given with the line of the planned module it happened in, or
// else of the last planned module that ran before it: the one whose output layout was read.
struct PlanTrace {
  std::vector<std::string> running;  // module paths, outermost first
  std::string last_planned;          // the plan key of the last planned module that ran
  std::string phase = "forward";
};

std::string failure_place(const Strategy& s, const PlanTrace& t,
                          const std::map<std::string, std::string>& key_of,
                          const std::map<std::string, std::string>& kind_of) {
  for (auto it = t.running.rbegin(); it != t.running.rend(); ++it) {
    if (key_of.count(*it) != 0) {
      return line_of(s, key_of.at(*it)) + ": one step under the plan fails in module '" + *it +
             "' (a " + kind_of.at(*it) + ") that this line plans";
    }
  }
  const std::string place = t.running.empty()
                                ? "the " + t.phase
                                : "module '" + t.running.back() + "' (a " +
                                      kind_of.at(t.running.back()) + ", not in the plan)";
  if (t.last_planned.empty()) {
    return s.name + ": one step under the plan fails in " + place +
           " before any planned module ran";
  }
  return line_of(s, t.last_planned) + ", the last plan line to run before the failure: one step " +
         "under the plan fails in " + place;
}

void step_under_plan(const Strategy& s, const ModelConfig& c) {
  const Batch batch = make_batch(c);
  run_ranks(s.mesh_shape.numel(), [&](const dist::ProcessGroupPtr&) {
    const DeviceMesh mesh(DeviceType::CPU, s.mesh_shape, s.dim_names);
    const std::shared_ptr<nn::Module> model = make_model(c);
    PlanTrace trace;
    std::map<std::string, std::string> key_of, kind_of;
    const auto modules = model->named_modules();
    for (const auto& [path, m] : modules) {
      kind_of[path] = m->name();
      for (const auto& [key, style] : s.plan) {
        if (!path.empty() &&
            tessera::detail::plan_key_matches(tessera::detail::split_module_path(key), path))
          key_of[path] = key;
      }
    }
    // Pre-hooks before the styles' (they see the input before it is converted), hooks after.
    for (const auto& [path, m] : modules) {
      if (path.empty()) continue;  // the root's own code: "the forward"
      m->register_forward_pre_hook([&trace, path](nn::Module&, const Tensor&) {
        trace.running.push_back(path);
        return Tensor();
      });
    }
    const RankData data = apply_strategy(s, c, *model, mesh, batch);
    for (const auto& [path, m] : modules) {
      if (path.empty()) continue;
      const bool planned = key_of.count(path) != 0;
      const std::string key = planned ? key_of.at(path) : "";
      m->register_forward_hook([&trace, planned, key](nn::Module&, const Tensor&, const Tensor&) {
        if (!trace.running.empty()) trace.running.pop_back();
        if (planned) trace.last_planned = key;
        return Tensor();
      });
    }
    try {
      const Tensor output = (*model)(data.input);
      trace.phase = "loss";
      const Tensor loss = loss_of(c, output, data.target);
      trace.phase = "backward";
      loss.backward();
    } catch (const CommError&) {
      throw;  // another rank's failure, which run_ranks reports
    } catch (const Error& e) {
      TS_CHECK(false, "[tessera-shardbench] ", failure_place(s, trace, key_of, kind_of), ": ",
               e.what());
    }
  });
}

}  // namespace

Strategy strategy_named(const std::string& name, int64_t ranks) {
  if (name == "single") return {StrategyKind::Single, "single", {}, {}, {}, {}};
  TS_CHECK(ranks >= 2, "[tessera-shardbench] strategy '", name, "' needs --ranks >= 2, got ",
           ranks);
  if (name == "dp") return {StrategyKind::DP, "DP", {ranks}, {}, {}, {}};
  if (name == "tp") return {StrategyKind::TP, "TP", {ranks}, {}, {}, {}};
  if (name == "sp") return {StrategyKind::SP, "SP", {ranks}, {}, {}, {}};
  if (name == "fsdp") return {StrategyKind::FSDP, "FSDP", {ranks}, {}, {}, {}};
  if (name == "fsdp_tp") {
    TS_CHECK(ranks % 2 == 0, "[tessera-shardbench] fsdp_tp lays the ranks out as 2 x ranks/2; ",
             "--ranks ", ranks, " is odd");
    return {StrategyKind::FSDP_TP, "FSDP x TP", {2, ranks / 2}, {"dp", "tp"}, {}, {}};
  }
  TS_CHECK(false, "[tessera-shardbench] unknown strategy '", name,
           "'; valid: single, dp, tp, sp, fsdp, fsdp_tp");
  return {};
}

void check_fits(const Strategy& s, const ModelConfig& c) {
  if (s.kind != StrategyKind::FSDP && s.kind != StrategyKind::FSDP_TP) return;
  const int64_t dp = s.mesh_shape[0];
  const bool mlp = c.preset == "mlp";
  const int64_t rows = mlp ? c.batch * c.seq : c.batch;
  const std::string flags = mlp ? "--batch x --seq" : "--batch";
  TS_CHECK(rows % dp == 0, "[tessera-shardbench] ", s.name, " gives each of its ", dp,
           " data-parallel ranks an equal share of the ", rows, mlp ? " rows (" : " sequences (",
           flags, "), and ", dp, " does not divide ", rows, "; valid: ", flags, " a multiple of ",
           dp, s.kind == StrategyKind::FSDP ? ", --ranks dividing " + std::to_string(rows) : "",
           ", or another strategy");
}

Strategy plan_from_file(const std::string& path, int64_t ranks) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "[tessera-shardbench] cannot read plan file '", path, "'");
  Strategy s{StrategyKind::Plan, "plan " + path, {ranks}, {}, {}, {}};
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string module, style, flag, extra;
    if (!(words >> module)) continue;
    const PlanLine here{number, path + ":" + std::to_string(number), trimmed(line)};
    TS_CHECK(static_cast<bool>(words >> style), "[tessera-shardbench] ", here.where,
             ": expected 'path style', got '", here.text, "'");
    bool dtensor_output = false;
    if (words >> flag) {
      TS_CHECK(flag == "dtensor", "[tessera-shardbench] ", here.where, ": unknown option '", flag,
               "'; valid: dtensor");
      dtensor_output = true;
    }
    // A word past the line's grammar is a mistake (a second entry on one line, a misspelled
    // comment), not something to skip.
    TS_CHECK(!(words >> extra), "[tessera-shardbench] ", here.where, ": unexpected word '", extra,
             "' after '", module, " ", style, dtensor_output ? " dtensor" : "",
             "'; a line is 'path style [dtensor]', '#' starts a comment");
    const auto earlier = s.plan_lines.find(module);
    TS_CHECK(earlier == s.plan_lines.end(), "[tessera-shardbench] ", here.where, ": '", module,
             "' is planned twice: ", earlier->second.where, " ('", earlier->second.text, "') and ",
             here.where, " ('", here.text, "'); keep one");
    s.plan[module] = style_named(style, dtensor_output, here.where);
    s.plan_lines[module] = here;
  }
  TS_CHECK(!s.plan.empty(), "[tessera-shardbench] plan file '", path, "' has no entry");
  return s;
}

void check_plan(const Strategy& s, const ModelConfig& c) {
  const std::shared_ptr<nn::Module> model = make_model(c);
  const auto modules = model->named_modules();
  std::map<std::string, std::string> planned_by;  // module path -> the plan key matching it
  for (const std::string& key : keys_in_file_order(s)) {
    const ParallelStyle& style = s.plan.at(key);
    const std::string where = line_of(s, key);
    const std::vector<std::string> parts = tessera::detail::split_module_path(key);
    bool found = false;
    for (const auto& [path, m] : modules) {
      if (path.empty() || !tessera::detail::plan_key_matches(parts, path)) continue;
      found = true;
      const auto [other, fresh] = planned_by.try_emplace(path, key);
      TS_CHECK(fresh, "[tessera-shardbench] ", where, ": module '", path, "' is also planned by ",
               line_of(s, other->second), "; plan each module once");
      check_style_fits(style, path, *m, s.mesh_shape.numel(), where);
    }
    TS_CHECK(found, "[tessera-shardbench] ", where, ": '", key, "' matches no submodule of the ",
             c.preset, " model; its paths are: ", module_paths(modules),
             " ('*' matches any one name)");
  }
  step_under_plan(s, c);
}

std::string module_list(const ModelConfig& c) {
  // The paths depend on the preset and the layers only: a model of the smallest widths names the
  // same ones without allocating the weights of a large one.
  ModelConfig small = c;
  small.hidden = small.heads = 1;
  small.vocab = 2;
  small.attention_width = small.mlp_width = 0;
  const std::shared_ptr<nn::Module> model = make_model(small);
  const auto paths = plan_paths(model->named_modules());
  size_t longest = 0;
  for (const auto& [path, kind] : paths) longest = std::max(longest, path.size());
  std::string text = c.preset == "mlp" ? "--plan paths of the mlp model:\n"
                                       : "--plan paths of the transformer model (--layers " +
                                             std::to_string(c.layers) +
                                             "; '*' matches any one name, here a block's index):\n";
  for (const auto& [path, kind] : paths) {
    text += "  " + path + std::string(longest + 2 - path.size(), ' ') + kind + "\n";
  }
  return text +
         "A plan line is 'path style [dtensor]': colwise and rowwise shard a Linear or an\n"
         "Embedding, sequence runs a module (a norm) on sequence shards; 'dtensor' keeps the\n"
         "output a DTensor.\n";
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
