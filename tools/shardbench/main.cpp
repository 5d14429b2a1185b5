// tessera-shardbench: see tools/README.md and --help.

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tools/shardbench/chart.h"
#include "tools/shardbench/cpu_load.h"
#include "tools/shardbench/options.h"
#include "tools/shardbench/progress.h"
#include "tools/shardbench/ranks.h"
#include "tools/shardbench/report.h"

namespace sb = tessera::shardbench;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  TS_CHECK(out.good(), "[tessera-shardbench] cannot write '", path, "'");
  out << text;
}

// The strategies of the run, checked against the model and the machine before the ranks
// communicate.
std::vector<sb::Strategy> strategies_of(const sb::Options& o) {
  // Before anything allocates: a model too large for the machine fails now, naming its flags,
  // not in an allocation after seconds of others.
  sb::check_memory(o, sb::machine_memory_bytes());
  std::vector<sb::Strategy> strategies;
  for (const std::string& name : o.strategies) {
    strategies.push_back(sb::strategy_named(name, o.ranks));
    sb::check_fits(strategies.back(), o.model);
  }
  if (!o.plan_file.empty()) strategies.push_back(sb::plan_from_file(o.plan_file, o.ranks));
  return strategies;
}

int run(const sb::Options& o, const std::vector<sb::Strategy>& strategies) {
  // One step under the plan before the others' rounds.
  if (!o.plan_file.empty()) sb::check_plan(strategies.back(), o.model);
  // One device: the losses every strategy must follow.
  const sb::Strategy single = sb::strategy_named("single", o.ranks);
  const bool root = sb::is_root_process();
  const double job_cpu_start_s = sb::job_cpu_seconds_elsewhere_on_host();
  const sb::CpuLoadMeter load;
  const int steps = o.run.warmup + o.run.steps;
  sb::ProgressBar bar(o.run.rounds * (steps * static_cast<int>(strategies.size() + 1) + 1), stderr,
                      root && isatty(fileno(stderr)) != 0);
  std::vector<tessera::Shape> meshes;
  std::set<sb::TensorParallelShare> tp_shares;
  int64_t largest_message = 0;  // the largest average message of a kind in a step
  for (const sb::Strategy& s : strategies) {
    if (s.mesh_shape.empty()) continue;
    meshes.push_back(s.mesh_shape);
    if (const auto share = sb::tensor_parallel_share_of(s, o.model)) tp_shares.insert(*share);
    if (s.kind == sb::StrategyKind::Plan) {
      // No closed form before it runs; its Rowwise outputs are all_reduces of the activations.
      const sb::ModelConfig& m = o.model;
      largest_message = std::max(largest_message, m.batch * m.seq * m.hidden *
                                                      static_cast<int64_t>(element_size(m.dtype)));
    }
    for (const sb::CollectiveTotal& t : sb::expected_collectives(s, o.model)) {
      largest_message = std::max(largest_message, t.bytes / std::max<int64_t>(1, t.count));
    }
  }
  // Rounds over one device and every strategy; the first round follows the calibration, whose
  // cost model plans the strategies' redistributes.
  std::vector<std::vector<sb::Measurement>> rounds(strategies.size());
  std::vector<sb::Measurement> one_rounds;
  std::vector<sb::ComputeRound> compute_rounds;
  std::optional<sb::Calibration> cal;
  for (int round = 0; round < o.run.rounds; ++round) {
    sb::on_root([&] {
      one_rounds.push_back(sb::measure(single, o.model, o.run, [&] { bar.step("one device"); }));
    });
    if (!cal) {
      cal = sb::calibrate(meshes, o.run.rounds, largest_message);
      cal->ranks = sb::rank_setup(o.ranks);
      cal->host_memory_bytes = sb::machine_memory_bytes();
      tessera::dtensor::set_cost_model(cal->model);
    }
    compute_rounds.push_back(sb::time_compute(o.model, o.run, o.ranks, tp_shares));
    bar.step("calibration");
    for (size_t i = 0; i < strategies.size(); ++i) {
      const sb::Strategy& s = strategies[i];
      if (s.kind == sb::StrategyKind::Single) {
        for (int k = 0; k < steps; ++k) bar.step(s.name);
        continue;
      }
      rounds[i].push_back(sb::measure(s, o.model, o.run, [&] { bar.step(s.name); }));
    }
  }
  // The measured window's; the job's other processes on this host are not "others".
  const double job_cpu_s = sb::job_cpu_seconds_elsewhere_on_host() - job_cpu_start_s;
  if (!root) return 0;  // the root reports (Note [One program, both worlds] in ranks.h)
  const std::optional<sb::CpuLoad> cpu_load = load.load(job_cpu_s);
  sb::set_compute(*cal, o.model, o.ranks, compute_rounds);
  const sb::Measurement one = sb::combine_rounds(one_rounds);
  std::vector<sb::StrategyResult> results;
  for (size_t i = 0; i < strategies.size(); ++i) {
    const sb::Strategy& s = strategies[i];
    sb::StrategyResult r{s, {}, {}, {}, 0.0};
    r.measured = s.kind == sb::StrategyKind::Single ? one : sb::combine_rounds(rounds[i]);
    r.expected = sb::expected_collectives(s, o.model);
    // A plan has no closed form: it is priced on the collectives its steps issued.
    r.predicted = sb::predict(
        s, o.model, *cal, s.kind == sb::StrategyKind::Plan ? r.measured.collectives : r.expected);
    for (size_t k = 0; k < r.measured.losses.size(); ++k) {
      r.loss_error = std::max(r.loss_error, std::abs(r.measured.losses[k] - one.losses[k]));
    }
    results.push_back(std::move(r));
  }
  fmt::print("{}", sb::table(o.model, *cal, results, cpu_load));
  if (!o.json_file.empty()) {
    write_file(o.json_file, sb::json(o.model, *cal, results, cpu_load));
    fmt::print("JSON: {}\n", o.json_file);
  }
  if (!o.svg_file.empty()) {
    write_file(o.svg_file, sb::svg(o.model, results, sb::run_warnings(*cal, results, cpu_load)));
    fmt::print("chart: {}\n", std::filesystem::absolute(o.svg_file).string());
  }
  return 0;
}

}  // namespace

int simulate(const sb::Options& o) {
  const sb::SimModel m = sb::sim_model_preset(o.sim_model);
  const sb::Cluster c = sb::cluster_named(o.cluster);
  const std::vector<sb::SimResult> results = sb::simulate(m, c, o.gpus, o.sim);
  fmt::print("{}", sb::simulation_table(m, c, o.sim, results));
  if (!o.json_file.empty()) {
    write_file(o.json_file, sb::simulation_json(m, c, o.sim, results));
    fmt::print("JSON: {}\n", o.json_file);
  }
  return 0;
}

// Started by a launcher as several processes, the ranks are those processes.
sb::Options options_of_this_run(const std::vector<std::string>& args) {
  sb::Options o = sb::parse_options(args);
  if (!sb::on_processes()) return o;
  const int64_t processes = sb::rank_setup(o.ranks).processes;
  TS_CHECK(!o.ranks_given || o.ranks == processes, "[tessera-shardbench] --ranks ", o.ranks,
           " in a launched job of ", processes,
           " processes: under a launcher the ranks are its processes (leave --ranks out, or give ",
           processes, ")");
  o.ranks = processes;
  return o;
}

// Whether any process of a launched job failed its setup; the lowest such rank says why, once
// (a flag error, which every rank finds alike, is said by rank 0 alone). Every process asks, so
// that none goes on into the run to wait for the ones that stop.
bool setup_failed_anywhere(const std::string& error) {
  if (!sb::on_processes()) {
    if (!error.empty()) fmt::print(stderr, "{}\n", error);
    return !error.empty();
  }
  const std::vector<std::vector<double>> failed =
      sb::gather_over_ranks(tessera::dist::world(), {error.empty() ? 0.0 : 1.0});
  const auto first = std::find_if(failed.begin(), failed.end(),
                                  [](const std::vector<double>& f) { return f[0] != 0.0; });
  if (first == failed.end()) return false;
  if (first - failed.begin() == tessera::dist::world()->rank()) {
    fmt::print(stderr, "{}\n", error);
  }
  return true;
}

int main(int argc, char** argv) {
  try {
    // Before the flags, so that a flag error is said once, by rank 0.
    if (tessera::dist::started_by_launcher() &&
        tessera::dist::launcher_world_size().value_or(1) > 1) {
      sb::join_launched_world();
    }
  } catch (const tessera::Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  sb::Options o;
  std::vector<sb::Strategy> strategies;
  std::string error;
  bool done = false;
  try {
    o = options_of_this_run(std::vector<std::string>(argv + 1, argv + argc));
    const bool root = sb::is_root_process();
    if (o.help || o.list_modules) {
      if (root) fmt::print("{}", o.help ? sb::usage() : sb::module_list(o.model));
      done = true;
    } else {
      if (root) sb::check_output_paths(o);  // the root writes them
      if (!o.simulate) strategies = strategies_of(o);
    }
  } catch (const tessera::Error& e) {
    error = e.what();
  }
  if (setup_failed_anywhere(error)) return 2;
  if (done) return 0;
  try {
    if (o.simulate) return sb::is_root_process() ? simulate(o) : 0;  // no ranks: the root's
    return run(o, strategies);
  } catch (const tessera::Error& e) {
    // Past the setup the ranks communicate. On rank threads an Error is every rank's
    // (run_threads aborts the others). A launched job ends through the backend's MPI_Abort,
    // naming the rank (Note [MPI job failure]): a process cannot tell the others, blocked in a
    // collective, to leave it.
    if (sb::on_processes()) throw;
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
}
