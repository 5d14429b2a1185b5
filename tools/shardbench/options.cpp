#include "tools/shardbench/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

namespace tessera::shardbench {

namespace {

constexpr int64_t kMaxLayers = 1 << 14, kMaxWidth = 1 << 17, kMaxSequence = 1 << 20;
constexpr int64_t kMaxBatch = 1 << 24, kMaxVocab = int64_t{1} << 31, kMaxRanks = 1 << 10;
constexpr int64_t kMaxSteps = 1 << 20, kMaxGpus = 1 << 20;
constexpr double kMinEfficiency = 1e-6;

// Each integer flag's range: what the program can compute without overflow (token counts, FLOP
// and byte totals in int64 and double) and a rank thread count one process can hold.
int64_t parse_int(const std::string& flag, const std::string& value, int64_t min, int64_t max) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TS_CHECK(used == value.size() && !value.empty(), "[tessera-shardbench] ", flag,
           " expects an integer, got '", value, "'");
  TS_CHECK(v >= min, "[tessera-shardbench] ", flag, " must be >= ", min, ", got ", v);
  TS_CHECK(v <= max, "[tessera-shardbench] ", flag, " must be <= ", max, ", got ", v);
  return v;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Decimal units, as the tool's tables print MB and GB.
std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  size_t u = 0;
  for (; u + 1 < std::size(units) && bytes >= 1000.0; ++u) bytes /= 1000.0;
  return bytes < 1000.0 ? fmt::format("{:.3g} {}", bytes, units[u])
                        : fmt::format("{:.0f} {}", bytes, units[u]);
}

// The terms that make up most of a step's high-water mark (each at least a tenth of it, and the
// largest always), largest first, with their flags: what a reader lowers.
std::string largest_terms(const StepMemory& m) {
  const bool activations_at_peak = m.activation_bytes() >= m.weight_bytes();
  struct Part {
    double bytes;
    std::string text;
  };
  std::vector<Part> parts;
  for (const MemoryTerm& t : m.weights) {
    const int copies = activations_at_peak ? 3 : 4;
    parts.push_back({copies * t.bytes,
                     fmt::format("{} {} x {} ({}; {} copies: the weights, {}AdamW's two moments)",
                                 t.what, copies, bytes_text(t.bytes), t.flags, copies,
                                 activations_at_peak ? "" : "their gradients, ")});
  }
  if (activations_at_peak) {
    for (const MemoryTerm& t : m.activations) {
      parts.push_back({t.bytes, fmt::format("{} {} ({})", t.what, bytes_text(t.bytes), t.flags)});
    }
  }
  std::sort(parts.begin(), parts.end(),
            [](const Part& x, const Part& y) { return x.bytes > y.bytes; });
  std::vector<std::string> listed;
  for (const Part& p : parts) {
    if (listed.empty() || p.bytes >= 0.1 * m.peak_bytes()) listed.push_back(p.text);
  }
  return fmt::format("{}", fmt::join(listed, "; "));
}

// The limit of the cgroup this process runs in (cgroup v2, then v1), when it sets one.
std::optional<double> cgroup_limit() {
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    double limit = 0.0;
    if (in >> limit && limit > 0.0) return limit;  // "max" reads as no number
  }
  return std::nullopt;
}

}  // namespace

RunMemory run_memory(const Options& o) {
  const RunMemory one{"one device's step", 1, step_memory(o.model)};
  const RunMemory replicas{
      fmt::format("the calibration's {} replicas trained at once (--ranks {})", o.ranks, o.ranks),
      o.ranks, step_memory(o.model, o.ranks)};
  return replicas.bytes() > one.bytes() ? replicas : one;
}

double machine_memory_bytes() {
  const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const std::optional<double> limit = cgroup_limit();
  return limit ? std::min(physical, *limit) : physical;
}

void check_memory(const Options& o, double available) {
  const RunMemory need = run_memory(o);
  const std::string holds =
      need.copies > 1 ? fmt::format("hold {} x {}", need.copies, bytes_text(need.step.peak_bytes()))
                      : "holds " + bytes_text(need.step.peak_bytes());
  TS_CHECK(need.bytes() <= available, "[tessera-shardbench] the run needs at least ",
           bytes_text(need.bytes()), " of memory, more than the ", bytes_text(available),
           " this machine has: ", need.phase, " ", holds, ", mostly ", largest_terms(need.step),
           ". Lower these flags");
}

std::string usage() {
  return R"(tessera-shardbench: train a model under sharding strategies on rank threads, measure each
step, calibrate a cost model on this machine and predict every strategy's step from it.

  --model transformer|mlp   the model (default transformer: embedding, blocks, norm, head,
                            cross_entropy; mlp: hidden -> 4 hidden -> hidden, mean squared error)
  --layers N                transformer blocks (default 2)
  --hidden N                model width (default 256)
  --heads N                 attention heads, dividing --hidden (default 8)
  --seq N                   sequence length (default 64)
  --batch N                 sequences per step (default 8; the MLP takes batch x seq rows)
  --vocab N                 vocabulary (default 2048)
  --dtype f32|f64|bf16      parameters and activations (default f32)
  --ranks N                 rank threads (default 4)
  --strategies LIST         comma-separated from single, dp, tp, sp, fsdp, fsdp_tp
                            (default all; fsdp_tp is a 2 x ranks/2 mesh "dp" x "tp")
  --plan FILE               also run an explicit plan: lines "submodule.path style [dtensor]",
                            style colwise | rowwise | sequence, '*' matches one path level;
                            checked against the model, and one step run, before the run
  --steps N                 timed steps per strategy and round (default 4)
  --warmup N                untimed steps first, each round (default 1)
  --rounds N                rounds over all strategies (default 3): a strategy's steps are
                            spread over the run, so that the machine's slow drifts and the rank
                            threads' placement on the cores weigh on every strategy alike
  --json FILE               write the results as JSON (with --simulate: the simulated plans)
  --svg FILE                write a chart of measured and predicted step times
  --help                    this text

Per strategy: step time (median, p10-p90; forward / backward / optimizer on rank 0), the step's
collectives alone, the predicted step and its error, peak tensor memory per rank, the largest
loss difference from one device, and the collectives of a step by kind and mesh dim (a line
says when they differ from the strategy's closed-form formula).

Simulation of a cluster that is not here (no measured run; see Note [Simulator assumptions] in
tools/shardbench/simulate.cpp): per number of GPUs and plan (DP, FSDP, TP, DP x TP, FSDP x TP,
TP inside a node) the step time, MFU, tokens/s per GPU, memory per GPU, feasibility, the best plan.
  --simulate                simulate instead of measuring
  --cluster NAME|FILE       8xH100 (default), 8xH200, A100 (8xA100 80GB, HDR IB) or a file of
                            "key = value" lines: name, gpus_per_node, intra_node_GBps,
                            intra_node_latency_us, inter_node_GBps (per GPU), inter_node_latency_us,
                            bf16_TFLOPs, memory_TBps, memory_GB, compute_efficiency (optional)
  --gpus LIST               GPU counts, comma-separated (default 8,64,512,4096)
  --sim-model NAME          7b (default), 70b (LLaMA-2 shapes), 175b (GPT-3), gpt-1.7b,
                            gpt-3.6b, gpt-7.5b, gpt-18.4b (Megatron-LM's Table 1)
  --global-batch N          sequences per step (default 1024)
  --micro-batch N           sequences per forward/backward (default 1)
  --seq N                   with --simulate: sequence length (default: the model's)
  --recompute               full activation recomputation
  --no-flash-attention      count attention's s x s scores in activation memory
  --efficiency X            fraction of bf16 peak compute reaches (default: the cluster's, 0.5)
)";
}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      continue;
    }
    if (flag == "--simulate" || flag == "--recompute" || flag == "--no-flash-attention") {
      o.simulate = o.simulate || flag == "--simulate";
      o.sim.recompute = o.sim.recompute || flag == "--recompute";
      o.sim.flash_attention = o.sim.flash_attention && flag != "--no-flash-attention";
      continue;
    }
    TS_CHECK(flag.rfind("--", 0) == 0, "[tessera-shardbench] unexpected argument '", flag,
             "'; see --help");
    TS_CHECK(i + 1 < args.size(), "[tessera-shardbench] ", flag, " expects a value");
    const std::string& value = args[++i];
    if (flag == "--model") {
      TS_CHECK(value == "transformer" || value == "mlp", "[tessera-shardbench] --model expects ",
               "transformer or mlp, got '", value, "'");
      o.model.preset = value;
    } else if (flag == "--layers") {
      o.model.layers = parse_int(flag, value, 1, kMaxLayers);
    } else if (flag == "--hidden") {
      o.model.hidden = parse_int(flag, value, 1, kMaxWidth);
    } else if (flag == "--heads") {
      o.model.heads = parse_int(flag, value, 1, kMaxWidth);
    } else if (flag == "--seq") {
      o.model.seq = parse_int(flag, value, 1, kMaxSequence);
      o.sim.seq = o.model.seq;
    } else if (flag == "--batch") {
      o.model.batch = parse_int(flag, value, 1, kMaxBatch);
    } else if (flag == "--vocab") {
      o.model.vocab = parse_int(flag, value, 2, kMaxVocab);
    } else if (flag == "--dtype") {
      TS_CHECK(value == "f32" || value == "f64" || value == "bf16",
               "[tessera-shardbench] --dtype expects f32, f64 or bf16, got '", value, "'");
      o.model.dtype = value == "f32" ? kFloat32 : value == "f64" ? kFloat64 : kBFloat16;
    } else if (flag == "--ranks") {
      o.ranks = parse_int(flag, value, 1, kMaxRanks);
    } else if (flag == "--strategies") {
      o.strategies = split_commas(value);
      TS_CHECK(!o.strategies.empty(), "[tessera-shardbench] --strategies is empty");
    } else if (flag == "--plan") {
      o.plan_file = value;
    } else if (flag == "--steps") {
      o.run.steps = static_cast<int>(parse_int(flag, value, 1, kMaxSteps));
    } else if (flag == "--rounds") {
      o.run.rounds = static_cast<int>(parse_int(flag, value, 1, kMaxSteps));
    } else if (flag == "--warmup") {
      o.run.warmup = static_cast<int>(parse_int(flag, value, 0, kMaxSteps));
    } else if (flag == "--json") {
      o.json_file = value;
    } else if (flag == "--svg") {
      o.svg_file = value;
    } else if (flag == "--cluster") {
      TS_CHECK(!value.empty(), "[tessera-shardbench] --cluster expects 8xH100, 8xH200, A100 or ",
               "a cluster file");
      o.cluster = value;
    } else if (flag == "--gpus") {
      o.gpus.clear();
      for (const std::string& n : split_commas(value))
        o.gpus.push_back(parse_int(flag, n, 1, kMaxGpus));
      TS_CHECK(!o.gpus.empty(), "[tessera-shardbench] --gpus is empty");
    } else if (flag == "--sim-model") {
      sim_model_preset(value);  // the error lists the valid names
      o.sim_model = value;
    } else if (flag == "--global-batch") {
      o.sim.global_batch = parse_int(flag, value, 1, kMaxBatch);
    } else if (flag == "--micro-batch") {
      o.sim.micro_batch = parse_int(flag, value, 1, kMaxBatch);
    } else if (flag == "--efficiency") {
      size_t used = 0;
      double v = 0.0;
      try {
        v = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TS_CHECK(used == value.size() && !value.empty() && v >= kMinEfficiency && v <= 1.0,
               "[tessera-shardbench] --efficiency expects a fraction in (0, 1] of at least ",
               kMinEfficiency, ", got '", value, "'");
      o.sim.efficiency = v;
    } else {
      TS_CHECK(false, "[tessera-shardbench] unknown flag ", flag, "; see --help");
    }
  }
  TS_CHECK(o.model.hidden % o.model.heads == 0, "[tessera-shardbench] --heads ", o.model.heads,
           " must divide --hidden ", o.model.hidden);
  return o;
}

}  // namespace tessera::shardbench
