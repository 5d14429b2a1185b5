#include "tools/shardbench/measured_cluster.h"

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/shardbench/model.h"

namespace tessera::shardbench {

namespace {

using Json = nlohmann::json;

// j[key] (a path "a.b"), which must be there and be a number.
double number_at(const Json& root, const std::string& path, const std::string& file) {
  const Json* j = &root;
  std::string rest = path;
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string key = rest.substr(0, dot);
    rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
    TS_CHECK(j->is_object() && j->contains(key), "[tessera-shardbench] --cluster '", file,
             "': a measured run's JSON has '", path,
             "'; this file has not (a JSON of --simulate, or of another program?)");
    j = &(*j)[key];
  }
  TS_CHECK(j->is_number(), "[tessera-shardbench] --cluster '", file, "': '", path,
           "' is not a number");
  return j->get<double>();
}

}  // namespace

bool looks_like_json(const std::string& path) {
  std::ifstream in(path);
  for (char ch; in.get(ch);) {
    if (!std::isspace(static_cast<unsigned char>(ch))) return ch == '{';
  }
  return false;
}

Cluster cluster_from_measured_run(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "[tessera-shardbench] --cluster '", path, "': cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  Json run;
  try {
    run = Json::parse(text.str());
  } catch (const Json::parse_error& e) {
    TS_CHECK(false, "[tessera-shardbench] --cluster '", path, "': not JSON (", e.what(), ")");
  }
  const auto at = [&](const std::string& key) { return number_at(run, key, path); };
  const auto ranks = static_cast<int64_t>(at("ranks.ranks"));
  const auto processes = static_cast<int64_t>(at("ranks.processes"));
  const int64_t on_host =
      processes > 1 ? static_cast<int64_t>(at("ranks.processes_on_this_host")) : ranks;
  const double threads = at("ranks.intra_op_threads_per_rank");

  // The largest group's all_reduce line, as a ring.
  int64_t group = 0;
  double alpha = 0.0, beta = 0.0;
  if (run.contains("calibration") && run["calibration"].contains("collectives")) {
    for (int64_t g = ranks; g >= 2 && group == 0; --g) {
      const std::string key = fmt::format("all_reduce/{}", g);
      if (!run["calibration"]["collectives"].contains(key)) continue;
      group = g;
      alpha = at("calibration.collectives." + key + ".alpha_s");
      beta = at("calibration.collectives." + key + ".beta_s_per_byte");
    }
  }
  TS_CHECK(group >= 2, "[tessera-shardbench] --cluster '", path,
           "': the run calibrated no all_reduce on 2 or more ranks (a run of one device only?): "
           "no link to simulate with");
  TS_CHECK(beta > 0.0, "[tessera-shardbench] --cluster '", path, "': all_reduce/", group,
           " has no bandwidth term (the run timed one message size): a run of a larger model "
           "calibrates one");
  const double steps = 2.0 * static_cast<double>(group - 1);
  Cluster c;
  c.name = fmt::format(
      "this machine ({}: {} ranks per host, {} intra-op thread{} each; between "
      "hosts as inside one)",
      path, on_host, threads, threads == 1.0 ? "" : "s");
  c.gpus_per_node = on_host;
  c.intra_bytes_per_s = steps / static_cast<double>(group) / beta;
  c.intra_latency_s = alpha / steps;
  c.inter_bytes_per_s = c.intra_bytes_per_s;
  c.inter_latency_s = c.intra_latency_s;

  const double one_thread_flops = at("calibration.gemm_flops_one_thread");
  c.peak_flops = one_thread_flops * threads;
  ModelConfig m;
  m.layers = static_cast<int64_t>(at("model.layers"));
  m.hidden = static_cast<int64_t>(at("model.hidden"));
  m.heads = static_cast<int64_t>(at("model.heads"));
  m.seq = static_cast<int64_t>(at("model.seq"));
  m.batch = static_cast<int64_t>(at("model.batch"));
  m.vocab = static_cast<int64_t>(at("model.vocab"));
  TS_CHECK(run["model"].value("preset", "") == "transformer", "[tessera-shardbench] --cluster '",
           path, "': the run trained the '", run["model"].value("preset", "?"),
           "' model; its compute efficiency holds for a transformer's step only");
  const double step_s = at("calibration.compute_fixed_s") +
                        at("calibration.compute_per_sequence_s") * static_cast<double>(m.batch);
  TS_CHECK(step_s > 0.0, "[tessera-shardbench] --cluster '", path,
           "': the calibrated one-thread step is 0 s");
  c.compute_efficiency = std::clamp(step_gemm_flops(m) / step_s / one_thread_flops, 1e-6, 1.0);

  c.memory_bytes_per_s = at("calibration.copy_bytes_per_s") / static_cast<double>(on_host);
  c.memory_bytes = at("calibration.host_memory_bytes") / static_cast<double>(on_host);
  return c;
}

}  // namespace tessera::shardbench
