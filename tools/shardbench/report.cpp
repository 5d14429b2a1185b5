#include "tools/shardbench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessera::shardbench {

namespace {

// Measured steps closer than this are within the machine's run-to-run noise (bench/RESULTS.md).
constexpr double kRankingMargin = 0.05;
// Above this share of stolen CPU time, runs of the same strategy differ by tens of percent.
constexpr double kQuietSteal = 0.03;

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

double relative_error(const StrategyResult& r) {
  const double measured = median(r.measured.step_s);
  return std::abs(r.predicted.step_s() - measured) / measured;
}

std::string model_text(const ModelConfig& c) {
  if (c.preset == "mlp") {
    return fmt::format("MLP {} rows x {} -> {} -> {}, {}", c.batch * c.seq, c.hidden, 4 * c.hidden,
                       c.hidden, dtype_name(c.dtype));
  }
  return fmt::format("transformer: {} layers, hidden {}, {} heads, batch {} x seq {}, vocab {}, {}",
                     c.layers, c.hidden, c.heads, c.batch, c.seq, c.vocab, dtype_name(c.dtype));
}

// A rate or ratio the calibration measured, or why there is none: one from a time of zero (a
// sample shorter than the clock's tick) is infinite, which a reader would take for a result.
std::string measured_text(double value, const char* format) {
  if (!std::isfinite(value) || value <= 0.0) return "not measured (a timing of 0 s)";
  return fmt::format(fmt::runtime(format), value);
}

// "a", "b": a JSON array's strings (none of them holds a quote).
std::string json_strings(const std::vector<std::string>& list) {
  std::string s;
  for (const std::string& item : list) {
    if (!s.empty()) s += ", ";
    s += '"';
    s += item;
    s += '"';
  }
  return s;
}

// JSON has no inf or nan.
std::string json_number(double value) {
  return std::isfinite(value) ? fmt::format("{:.6g}", value) : "null";
}

}  // namespace

double median_prediction_error(const std::vector<StrategyResult>& results) {
  std::vector<double> errors;
  for (const StrategyResult& r : results) errors.push_back(relative_error(r));
  return median(errors);
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
                  const std::vector<StrategyResult>& results, std::optional<double> steal) {
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
  if (get_num_threads() == 1) {
    s += "pointwise op on the activations: one intra-op thread, no speedup over one to measure\n";
  } else {
    s += fmt::format("pointwise op on the activations: {} faster on {} threads than on one\n",
                     measured_text(cal.pointwise_speedup, "{:.2f}x"), get_num_threads());
  }
  for (const std::string& note : cal.notes) s += "calibration: " + note + "\n";
  for (const auto& [share, seconds] : cal.tp_share_s) {
    s += fmt::format(
        "a {}-way tensor-parallel rank's share on every rank at once, batch {}: {:.2f} ms\n",
        share.degree, share.batch, seconds * 1e3);
  }
  s += fmt::format(
      "{:<10} {:>9} {:>15} {:>8} {:>8} {:>8} {:>9} {:>10} {:>9} {:>7} {:>9} {:>9}  {}\n",
      "strategy", "step ms", "p10-p90 ms", "fwd ms", "bwd ms", "opt ms", "comm ms", "predicted",
      "pred comm", "error", "peak MB", "loss diff",
      "collectives per step (rank 0; bytes: whole messages)");
  for (const StrategyResult& r : results) {
    const Measurement& m = r.measured;
    s += fmt::format(
        "{:<10} {:>9.2f} {:>7.2f}-{:<7.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>9.2f} {:>10.2f} {:>9.2f} "
        "{:>6.0f}% {:>9.1f} {:>9.1e}  {}{}\n",
        r.strategy.name, median(m.step_s) * 1e3, percentile(m.step_s, 0.1) * 1e3,
        percentile(m.step_s, 0.9) * 1e3, m.forward_s * 1e3, m.backward_s * 1e3, m.optimizer_s * 1e3,
        m.comm_alone_s * 1e3, r.predicted.step_s() * 1e3, r.predicted.comm_s * 1e3,
        100 * relative_error(r), static_cast<double>(m.peak_bytes) / 1e6, r.loss_error,
        collectives_text(m.collectives),
        r.expected == m.collectives || r.strategy.kind == StrategyKind::Plan
            ? ""
            : "  [differs from the formula: " + collectives_text(r.expected) + "]");
  }
  s += fmt::format(
      "median |predicted - measured| / measured: {:.0f}%  (comm ms: the step's collectives alone "
      "on the same groups)\n",
      100 * median_prediction_error(results));
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
  if (steal) {
    s += fmt::format(
        "CPU time taken by the hypervisor for other guests during the run (steal): {:.0f}%{}\n",
        100 * *steal,
        *steal > kQuietSteal ? " -- a shared machine: runs differ, compare within one run" : "");
  }
  return s;
}

std::string json(const ModelConfig& c, const Calibration& cal,
                 const std::vector<StrategyResult>& results, std::optional<double> steal) {
  std::string s = fmt::format(
      "{{\n  \"model\": {{\"preset\": \"{}\", \"layers\": {}, \"hidden\": {}, \"heads\": {}, "
      "\"seq\": {}, \"batch\": {}, \"vocab\": {}, \"dtype\": \"{}\", \"parameters\": {}}},\n",
      c.preset, c.layers, c.hidden, c.heads, c.seq, c.batch, c.vocab, dtype_name(c.dtype),
      parameter_count(c));
  s += fmt::format(
      "  \"calibration\": {{\"cores\": {}, \"gemm_flops_per_s\": {}, "
      "\"gemm_flops_one_thread\": {}, \"copy_bytes_per_s\": {}, \"compute_fixed_s\": "
      "{:.6g}, \"compute_per_sequence_s\": {:.6g}, \"replicated_compute_s\": {:.6g}, "
      "\"replicated_optimizer_s\": {:.6g}, \"pointwise_speedup\": {}, \"notes\": [{}], "
      "\"tp_share\": [",
      cal.cores, json_number(cal.gemm_flops_per_s), json_number(cal.gemm_flops_one_thread),
      json_number(cal.model.local_bytes_per_s), cal.compute.fixed_s, cal.compute.per_sequence_s,
      cal.replicated_compute_s, cal.replicated_optimizer_s, json_number(cal.pointwise_speedup),
      json_strings(cal.notes));
  bool first = true;
  for (const auto& [share, seconds] : cal.tp_share_s) {
    s += fmt::format("{}{{\"degree\": {}, \"batch\": {}, \"seconds\": {:.6g}}}", first ? "" : ", ",
                     share.degree, share.batch, seconds);
    first = false;
  }
  s += "], \"collectives\": {";
  first = true;
  for (const auto& [key, ab] : cal.model.measured) {
    s += fmt::format("{}\"{}\": {{\"alpha_s\": {:.6g}, \"beta_s_per_byte\": {:.6g}}}",
                     first ? "" : ", ", key, ab.alpha_s, ab.beta_s_per_byte);
    first = false;
  }
  s += "}},\n  \"strategies\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const StrategyResult& r = results[i];
    const Measurement& m = r.measured;
    std::string comms;
    for (const CollectiveTotal& t : m.collectives) {
      comms += fmt::format(
          "{}{{\"kind\": \"{}\", \"mesh_dim\": \"{}\", \"group_size\": {}, "
          "\"count\": {}, \"bytes\": {}}}",
          comms.empty() ? "" : ", ", t.kind, t.mesh_dim, t.group_size, t.count, t.bytes);
    }
    s += fmt::format(
        "    {{\"name\": \"{}\", \"mesh\": [{}], \"step_s_median\": {:.6g}, \"step_s_p10\": "
        "{:.6g}, \"step_s_p90\": {:.6g}, \"forward_s\": {:.6g}, \"backward_s\": {:.6g}, "
        "\"optimizer_s\": {:.6g}, \"comm_alone_s\": {:.6g}, \"predicted_step_s\": {:.6g}, "
        "\"predicted_comm_s\": {:.6g}, \"predicted_local_s\": {:.6g}, \"peak_bytes\": {}, "
        "\"loss_error\": {:.3g}, "
        "\"collectives\": [{}], \"collectives_match_formula\": {}}}{}\n",
        r.strategy.name, fmt::join(r.strategy.mesh_shape, ", "), median(m.step_s),
        percentile(m.step_s, 0.1), percentile(m.step_s, 0.9), m.forward_s, m.backward_s,
        m.optimizer_s, m.comm_alone_s, r.predicted.step_s(), r.predicted.comm_s,
        r.predicted.local_s, m.peak_bytes, r.loss_error, comms,
        r.expected == m.collectives ? "true" : "false", i + 1 < results.size() ? "," : "");
  }
  const RankingAgreement ranking = ranking_agreement(results, kRankingMargin);
  s += fmt::format(
      "  ],\n  \"median_prediction_error\": {:.4f},\n  \"ranking_pairs\": {},\n  "
      "\"ranking_discordant\": [{}],\n  \"ranking_separated_pairs\": {},\n  "
      "\"ranking_separated_discordant\": {},\n  \"tracing_overhead\": {:.6f},\n  \"steal\": "
      "{}\n}}\n",
      median_prediction_error(results), ranking.pairs, json_strings(ranking.discordant),
      ranking.separated, ranking.separated_discordant, tracing_overhead(results),
      steal ? fmt::format("{:.4f}", *steal) : "null");
  return s;
}

std::string svg(const ModelConfig& c, const std::vector<StrategyResult>& results) {
  // Per strategy two bars: measured (compute, then the collectives' time alone) and predicted
  // (compute, communication).
  double longest = 1e-9;
  for (const StrategyResult& r : results) {
    longest = std::max({longest, median(r.measured.step_s), r.predicted.step_s()});
  }
  const int left = 110, width = 560, row = 46, top = 50;
  const int height = top + row * static_cast<int>(results.size()) + 40;
  auto px = [&](double s) { return s / longest * width; };
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<text x=\"10\" y=\"20\" "
      "font-size=\"14\">tessera-shardbench: step time per strategy ({})</text>\n",
      left + width + 120, height, model_text(c));
  const char* compute = "#4c78a8";
  const char* comm = "#f58518";
  for (size_t i = 0; i < results.size(); ++i) {
    const StrategyResult& r = results[i];
    const int y = top + row * static_cast<int>(i);
    const double step = median(r.measured.step_s);
    const double comm_alone = std::min(r.measured.comm_alone_s, step);
    out += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + 16, r.strategy.name);
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"{}\"/><rect x=\"{:.1f}\" "
        "y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"{}\"/><text x=\"{:.1f}\" y=\"{}\">"
        "measured {:.1f} ms</text>\n",
        left, y, px(step - comm_alone), compute, left + px(step - comm_alone), y, px(comm_alone),
        comm, left + px(step) + 4, y + 12, step * 1e3);
    // As measured: everything but the collectives (compute and the copies around them).
    const double predicted_local = r.predicted.compute_s + r.predicted.local_s;
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"{}\" fill-opacity=\"0.5\"/>"
        "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"16\" fill=\"{}\" "
        "fill-opacity=\"0.5\"/><text x=\"{:.1f}\" y=\"{}\">predicted {:.1f} ms</text>\n",
        left, y + 18, px(predicted_local), compute, left + px(predicted_local), y + 18,
        px(r.predicted.comm_s), comm, left + px(r.predicted.step_s()) + 4, y + 30,
        r.predicted.step_s() * 1e3);
  }
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\"><tspan fill=\"{}\">compute</tspan>  <tspan fill=\"{}\">"
      "communication</tspan>  (solid: measured, pale: predicted)</text>\n</svg>\n",
      left, height - 12, compute, comm);
  return out;
}

}  // namespace tessera::shardbench
