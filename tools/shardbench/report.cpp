#include "tools/shardbench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/shardbench/json_writer.h"
#include "tools/shardbench/warnings.h"

namespace tessera::shardbench {

namespace {

// Measured steps closer than this are within the machine's run-to-run noise (bench/RESULTS.md).
constexpr double kRankingMargin = 0.05;

std::string short_kind(const std::string& kind) {
  if (kind == "all_gather_into_tensor") return "all_gather";
  if (kind == "reduce_scatter_tensor") return "reduce_scatter";
  return kind;
}

std::string collectives_text(const std::vector<CollectiveTotal>& list) {
  std::string s;
  for (const CollectiveTotal& t : list) {
    s += fmt::format("{}{} {}x{} {:.2f} MB", s.empty() ? "" : ", ", short_kind(t.kind), t.count,
                     t.mesh_dim == "0" ? "" : "@" + t.mesh_dim, static_cast<double>(t.bytes) / 1e6);
  }
  return s.empty() ? "none" : s;
}

// " (1/4 of the MLP alone, the rest whole)": the parts a t-way share holds 1/t of, when not all
// (an explicit plan's; Note [Predicting a plan]).
std::string parts_text(const ShardedParts& p, int64_t t) {
  if (p == ShardedParts{}) return "";
  std::vector<std::string> parts;
  if (p.attention) parts.push_back("attention");
  if (p.mlp) parts.push_back("MLP");
  if (p.vocab) parts.push_back("vocabulary");
  if (parts.empty()) return " (no part sharded whole: the whole model, an upper bound)";
  return fmt::format(" (1/{} of the {} alone, the rest whole)", t, fmt::join(parts, " and "));
}

double relative_error(const StrategyResult& r) {
  const double measured = median(r.measured.step_s);
  return std::abs(r.predicted.step_s() - measured) / measured;
}

// A rate or ratio the calibration measured, or why there is none: one from a time of zero (a
// sample shorter than the clock's tick) is infinite, which a reader would take for a result.
constexpr const char* kNotMeasured = "not measured (a timing of 0 s)";
std::string measured_text(double value, const char* format) {
  if (!std::isfinite(value) || value <= 0.0) return kNotMeasured;
  return fmt::format(fmt::runtime(format), value);
}

}  // namespace

std::string model_text(const ModelConfig& c) {
  if (c.preset == "mlp") {
    return fmt::format("MLP {} rows x {} -> {} -> {}, {}", c.batch * c.seq, c.hidden, 4 * c.hidden,
                       c.hidden, dtype_name(c.dtype));
  }
  return fmt::format(
      "transformer: {} layer{}, hidden {}, {} head{}, batch {} x seq {}, vocab {}, {}", c.layers,
      c.layers == 1 ? "" : "s", c.hidden, c.heads, c.heads == 1 ? "" : "s", c.batch, c.seq, c.vocab,
      dtype_name(c.dtype));
}

double median_prediction_error(const std::vector<StrategyResult>& results) {
  std::vector<double> errors;
  for (const StrategyResult& r : results) errors.push_back(relative_error(r));
  return errors.empty() ? std::nan("") : median(errors);
}

RankingAgreement ranking_agreement(const std::vector<StrategyResult>& results, double margin) {
  RankingAgreement a;
  for (size_t i = 0; i < results.size(); ++i) {
    for (size_t j = i + 1; j < results.size(); ++j) {
      const StrategyResult* fast = &results[i];
      const StrategyResult* slow = &results[j];
      if (median(fast->measured.step_s) > median(slow->measured.step_s)) std::swap(fast, slow);
      const double measured_fast = median(fast->measured.step_s);
      if (median(slow->measured.step_s) - measured_fast <= margin * measured_fast) continue;
      ++a.pairs;
      const bool separated =
          percentile(fast->measured.step_s, 0.9) < percentile(slow->measured.step_s, 0.1);
      a.separated += separated ? 1 : 0;
      if (fast->predicted.step_s() >= slow->predicted.step_s()) {
        a.discordant.push_back(fast->strategy.name + " < " + slow->strategy.name);
        a.separated_discordant += separated ? 1 : 0;
      }
    }
  }
  return a;
}

double tracing_overhead(const std::vector<StrategyResult>& results) {
  double worst = 0;
  for (const StrategyResult& r : results) {
    worst = std::max(worst, r.measured.tracing_s / median(r.measured.step_s));
  }
  return worst;
}

std::string table(const ModelConfig& c, const Calibration& cal,
                  const std::vector<StrategyResult>& results, std::optional<CpuLoad> load) {
  std::string s = fmt::format(
      "{}; {:.1f} M parameters; {} cores; GEMM {} ({}), copy {}\ncalibrated "
      "compute (one thread): {:.2f} ms per step + {:.2f} ms per sequence (batch {} and {}), "
      "optimizer {:.2f} ms; replicas on every rank at once: {:.2f} ms, their optimizer {:.2f} ms\n",
      model_text(c), static_cast<double>(parameter_count(c)) / 1e6, cal.cores,
      measured_text(cal.gemm_flops_per_s / 1e9, "{:.1f} GFLOP/s"),
      measured_text(cal.gemm_flops_one_thread / 1e9, "{:.1f} on one thread"),
      measured_text(cal.model.local_bytes_per_s / 1e9, "{:.1f} GB/s"), cal.compute.fixed_s * 1e3,
      cal.compute.per_sequence_s * 1e3, cal.batch, cal.small_batch,
      cal.one_thread.optimizer_s * 1e3, cal.replicated_compute_s * 1e3,
      cal.replicated_optimizer_s * 1e3);
  s += "ranks: " + rank_setup_text(cal.ranks) + "\n";
  if (get_num_threads() == 1) {
    s += "pointwise op on the activations: one intra-op thread, no speedup over one to measure\n";
  } else {
    s += fmt::format("pointwise op on the activations: {} faster on {} threads than on one\n",
                     measured_text(cal.pointwise_speedup, "{:.2f}x"), get_num_threads());
  }
  for (const std::string& note : cal.notes) s += "calibration: " + note + "\n";
  for (const auto& [share, seconds] : cal.tp_share_s) {
    s += fmt::format(
        "a {}-way tensor-parallel rank's share{} on every rank at once, batch {}: {:.2f} ms\n",
        share.degree, parts_text(share.parts, share.degree), share.batch, seconds * 1e3);
  }
  s += fmt::format(
      "{:<10} {:>9} {:>15} {:>8} {:>8} {:>8} {:>9} {:>8} {:>10} {:>9} {:>7} {:>9} {:>9}  {}\n",
      "strategy", "step ms", "p10-p90 ms", "fwd ms", "bwd ms", "opt ms", "comm ms", "exposed",
      "predicted", "pred comm", "error", "peak MB", "loss diff",
      "collectives per step (rank 0; bytes: whole messages)");
  for (const StrategyResult& r : results) {
    const Measurement& m = r.measured;
    s += fmt::format(
        "{:<10} {:>9.2f} {:>7.2f}-{:<7.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>9.2f} {:>8.2f} {:>10.2f} "
        "{:>9.2f} {:>6.0f}% {:>9.1f} {:>9.1e}  {}{}\n",
        r.strategy.name, median(m.step_s) * 1e3, percentile(m.step_s, 0.1) * 1e3,
        percentile(m.step_s, 0.9) * 1e3, m.forward_s * 1e3, m.backward_s * 1e3, m.optimizer_s * 1e3,
        m.comm_alone_s * 1e3, m.exposed_comm_s * 1e3, r.predicted.step_s() * 1e3,
        r.predicted.comm_s * 1e3, 100 * relative_error(r), static_cast<double>(m.peak_bytes) / 1e6,
        r.loss_error, collectives_text(m.collectives),
        r.expected == m.collectives || r.strategy.kind == StrategyKind::Plan
            ? ""
            : "  [differs from the formula: " + collectives_text(r.expected) + "]");
  }
  const double error = median_prediction_error(results);
  const auto plans = std::count_if(results.begin(), results.end(), [](const StrategyResult& r) {
    return r.strategy.kind == StrategyKind::Plan;
  });
  const auto strategies = static_cast<int64_t>(results.size()) - plans;
  const auto counted = [](int64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  s += fmt::format(
      "median |predicted - measured| / measured: {} over {}{}  (comm ms: the step's collectives "
      "alone on the same groups; exposed: the step's time a rank was blocked in them)\n",
      std::isnan(error) ? "none" : fmt::format("{:.0f}%", 100 * error),
      counted(strategies, "strategy", "strategies"),
      plans == 0 ? "" : " and " + counted(plans, "plan", "plans"));
  const RankingAgreement ranking = ranking_agreement(results, kRankingMargin);
  s += fmt::format(
      "ranking: the prediction orders {} of {} pairs of strategies as measured (pairs more than "
      "{:.0f}% apart){}; of them, {} of {} whose p10-p90 do not overlap\n",
      ranking.pairs - static_cast<int>(ranking.discordant.size()), ranking.pairs,
      100 * kRankingMargin,
      ranking.discordant.empty() ? ""
                                 : fmt::format("; measured {}, predicted the other way",
                                               fmt::join(ranking.discordant, ", ")),
      ranking.separated - ranking.separated_discordant, ranking.separated);
  s += fmt::format(
      "tracing and counting the collectives: at most {:.3f}% of a step; the cost model also plans "
      "the redistributes\n",
      100 * tracing_overhead(results));
  if (load) {
    s += fmt::format(
        "CPU time taken during the run by other processes: {:.0f}%; by the hypervisor for other "
        "guests (steal): {:.0f}%\n",
        100 * load->others, 100 * load->steal);
  }
  for (const Warning& w : run_warnings(cal, results, load)) s += "warning: " + w.text + "\n";
  return s;
}

std::string json(const ModelConfig& c, const Calibration& cal,
                 const std::vector<StrategyResult>& results, std::optional<CpuLoad> load) {
  JsonObject model;
  model.text("preset", c.preset)
      .integer("layers", c.layers)
      .integer("hidden", c.hidden)
      .integer("heads", c.heads)
      .integer("seq", c.seq)
      .integer("batch", c.batch)
      .integer("vocab", c.vocab)
      .text("dtype", dtype_name(c.dtype))
      .integer("parameters", parameter_count(c));
  Json tp_shares = Json::array();
  for (const auto& [share, seconds] : cal.tp_share_s) {
    tp_shares.push_back(JsonObject()
                            .integer("degree", share.degree)
                            .integer("batch", share.batch)
                            .boolean("attention_sharded", share.parts.attention)
                            .boolean("mlp_sharded", share.parts.mlp)
                            .boolean("vocab_sharded", share.parts.vocab)
                            .number("seconds", seconds)
                            .json());
  }
  JsonObject lines;
  for (const auto& [key, ab] : cal.model.measured) {
    lines.value(key, JsonObject()
                         .number("alpha_s", ab.alpha_s)
                         .number("beta_s_per_byte", ab.beta_s_per_byte)
                         .json());
  }
  JsonObject calibration;
  // A rate from a time of zero, as measured_text says: null, not a rate of inf or of 0.
  const auto rate = [&](const char* key, double value) {
    if (value > 0.0) return calibration.number(key, value, kNotMeasured);
    return calibration.null(key, kNotMeasured);
  };
  calibration.integer("cores", cal.cores);
  rate("gemm_flops_per_s", cal.gemm_flops_per_s);
  rate("gemm_flops_one_thread", cal.gemm_flops_one_thread);
  rate("copy_bytes_per_s", cal.model.local_bytes_per_s);
  calibration.number("host_memory_bytes", cal.host_memory_bytes);
  rate("pointwise_speedup", cal.pointwise_speedup);
  calibration.number("compute_fixed_s", cal.compute.fixed_s)
      .number("compute_per_sequence_s", cal.compute.per_sequence_s)
      .number("replicated_compute_s", cal.replicated_compute_s)
      .number("replicated_optimizer_s", cal.replicated_optimizer_s)
      .value("notes", Json(cal.notes))
      .value("tp_share", tp_shares)
      .value("collectives", lines.json());
  Json strategies = Json::array();
  for (const StrategyResult& r : results) {
    const Measurement& m = r.measured;
    Json comms = Json::array();
    for (const CollectiveTotal& t : m.collectives) {
      comms.push_back(JsonObject()
                          .text("kind", t.kind)
                          .text("mesh_dim", t.mesh_dim)
                          .integer("group_size", t.group_size)
                          .integer("count", t.count)
                          .integer("bytes", t.bytes)
                          .json());
    }
    Json mesh = Json::array();
    for (const int64_t d : r.strategy.mesh_shape) mesh.push_back(d);
    strategies.push_back(JsonObject()
                             .text("name", r.strategy.name)
                             .value("mesh", mesh)
                             .number("step_s_median", median(m.step_s))
                             .number("step_s_p10", percentile(m.step_s, 0.1))
                             .number("step_s_p90", percentile(m.step_s, 0.9))
                             .number("forward_s", m.forward_s)
                             .number("backward_s", m.backward_s)
                             .number("optimizer_s", m.optimizer_s)
                             .number("comm_alone_s", m.comm_alone_s)
                             .number("exposed_comm_s", m.exposed_comm_s)
                             .number("predicted_step_s", r.predicted.step_s())
                             .number("predicted_comm_s", r.predicted.comm_s)
                             .number("predicted_local_s", r.predicted.local_s)
                             .integer("peak_bytes", m.peak_bytes)
                             .number("loss_error", r.loss_error)
                             .value("collectives", comms)
                             .boolean("collectives_match_formula", r.expected == m.collectives)
                             .json());
  }
  Json warnings = Json::array();
  for (const Warning& w : run_warnings(cal, results, load)) {
    warnings.push_back(JsonObject().text("figure", w.figure).text("text", w.text).json());
  }
  const RankingAgreement ranking = ranking_agreement(results, kRankingMargin);
  JsonObject out;
  out.value("model", model.json())
      .value("ranks", JsonObject()
                          .text("backend", cal.ranks.backend)
                          .integer("ranks", cal.ranks.ranks)
                          .integer("processes", cal.ranks.processes)
                          .integer("processes_on_this_host", cal.ranks.processes_on_this_host)
                          .integer("intra_op_threads_per_rank", cal.ranks.intra_op_threads)
                          .json())
      .value("calibration", calibration.json())
      .value("strategies", strategies)
      .number("median_prediction_error", median_prediction_error(results))
      .integer("ranking_pairs", ranking.pairs)
      .value("ranking_discordant", Json(ranking.discordant))
      .integer("ranking_separated_pairs", ranking.separated)
      .integer("ranking_separated_discordant", ranking.separated_discordant)
      .number("tracing_overhead", tracing_overhead(results));
  const char* no_stat = "not measured (/proc/stat unreadable)";
  if (load) {
    out.number("steal", load->steal).number("other_processes", load->others);
  } else {
    out.null("steal", no_stat).null("other_processes", no_stat);
  }
  out.value("warnings", warnings);
  return out.str(2) + "\n";
}

}  // namespace tessera::shardbench
