#include "tools/shardbench/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>

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
  --ranks N                 rank threads (default 4); under mpirun -n N the ranks are the
                            job's processes (leave it out, or give N)
  --strategies LIST         comma-separated from single, dp, tp, sp, fsdp, fsdp_tp
                            (default all; fsdp_tp is a 2 x ranks/2 mesh "dp" x "tp"; fsdp
                            and fsdp_tp need their "dp" ranks to divide the batch)
  --plan FILE               also run an explicit plan: lines "submodule.path style [dtensor]",
                            style colwise | rowwise | sequence, '*' matches one path level;
                            checked against the model, and one step run, before the run
  --steps N                 timed steps per strategy and round (default 4)
  --warmup N                untimed steps first, each round (default 1)
  --rounds N                rounds over all strategies (default 3): a strategy's steps are
                            spread over the run, so that the machine's slow drifts and the rank
                            threads' placement on the cores weigh on every strategy alike
  --list-modules            print the model's submodule paths that --plan lines can name (for
                            the --model and --layers given) and exit
  --json FILE               write the results as JSON (with --simulate: the simulated plans);
                            a figure that is not finite is null, with "<key>_reason" beside it
  --svg FILE                write a chart of measured and predicted step times
                            (--json and --svg paths are checked before the run)
  --help                    this text

Per strategy: step time (median, p10-p90; forward / backward / optimizer on rank 0), the step's
collectives alone, the predicted step and its error, peak tensor memory per rank, the largest
loss difference from one device, and the collectives of a step by kind and mesh dim (a line
says when they differ from the strategy's closed-form formula). Then the CPU time other processes
and the hypervisor (steal) took during the run, and a "warning:" line for each figure that the
machine's load or a clamped calibration makes meaningless.

Simulation of a cluster that is not here (no measured run; see Note [Simulator assumptions] in
tools/shardbench/simulate.cpp): per number of GPUs and plan (DP, FSDP, TP, DP x TP, FSDP x TP,
TP inside a node) the step time, MFU, tokens/s per GPU, memory per GPU, feasibility, the best plan.
  --simulate                simulate instead of measuring
  --cluster NAME|FILE       8xH100 (default), 8xH200, A100 (8xA100 80GB, HDR IB) or a file of
                            "key = value" lines: name, gpus_per_node, intra_node_GBps,
                            intra_node_latency_us, inter_node_GBps (per GPU), inter_node_latency_us,
                            bf16_TFLOPs, memory_TBps, memory_GB, compute_efficiency (optional);
                            or the --json of a measured run: this machine, each rank a GPU, from
                            its calibration (links, GEMM rate, measured efficiency, memory)
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

namespace {

double parse_efficiency(const std::string& value) {
  const double v = parse_number(value).value_or(0.0);
  TS_CHECK(v >= kMinEfficiency && v <= 1.0,
           "[tessera-shardbench] --efficiency expects a fraction in (0, 1] of at least ",
           kMinEfficiency, ", got '", value, "'");
  return v;
}

// Every flag, in one table: parse_options gives each to CLI11, and a misspelt flag is compared
// with their names.
using Set = void (*)(Options& o, const std::string& flag, const std::string& value);
struct Flag {
  std::string_view name;
  bool takes_value;
  Set set;
};
const Flag kFlags[] = {
    {"--help", false, [](Options& o, const std::string&, const std::string&) { o.help = true; }},
    {"-h", false, [](Options& o, const std::string&, const std::string&) { o.help = true; }},
    {"--list-modules", false,
     [](Options& o, const std::string&, const std::string&) { o.list_modules = true; }},
    {"--simulate", false,
     [](Options& o, const std::string&, const std::string&) { o.simulate = true; }},
    {"--recompute", false,
     [](Options& o, const std::string&, const std::string&) { o.sim.recompute = true; }},
    {"--no-flash-attention", false,
     [](Options& o, const std::string&, const std::string&) { o.sim.flash_attention = false; }},
    {"--model", true,
     [](Options& o, const std::string&, const std::string& v) {
       TS_CHECK(v == "transformer" || v == "mlp", "[tessera-shardbench] --model expects ",
                "transformer or mlp, got '", v, "'");
       o.model.preset = v;
     }},
    {"--layers", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.model.layers = parse_int(f, v, 1, kMaxLayers);
     }},
    {"--hidden", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.model.hidden = parse_int(f, v, 1, kMaxWidth);
     }},
    {"--heads", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.model.heads = parse_int(f, v, 1, kMaxWidth);
     }},
    {"--seq", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.model.seq = parse_int(f, v, 1, kMaxSequence);
       o.sim.seq = o.model.seq;
     }},
    {"--batch", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.model.batch = parse_int(f, v, 1, kMaxBatch);
     }},
    {"--vocab", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.model.vocab = parse_int(f, v, 2, kMaxVocab);
     }},
    {"--dtype", true,
     [](Options& o, const std::string&, const std::string& v) {
       TS_CHECK(v == "f32" || v == "f64" || v == "bf16",
                "[tessera-shardbench] --dtype expects f32, f64 or bf16, got '", v, "'");
       o.model.dtype = v == "f32" ? kFloat32 : v == "f64" ? kFloat64 : kBFloat16;
     }},
    {"--ranks", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.ranks = parse_int(f, v, 1, kMaxRanks);
       o.ranks_given = true;
     }},
    {"--strategies", true,
     [](Options& o, const std::string&, const std::string& v) {
       o.strategies = split_commas(v);
       TS_CHECK(!o.strategies.empty(), "[tessera-shardbench] --strategies is empty");
     }},
    {"--plan", true, [](Options& o, const std::string&, const std::string& v) { o.plan_file = v; }},
    {"--steps", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.run.steps = static_cast<int>(parse_int(f, v, 1, kMaxSteps));
     }},
    {"--rounds", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.run.rounds = static_cast<int>(parse_int(f, v, 1, kMaxSteps));
     }},
    {"--warmup", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.run.warmup = static_cast<int>(parse_int(f, v, 0, kMaxSteps));
     }},
    {"--json", true, [](Options& o, const std::string&, const std::string& v) { o.json_file = v; }},
    {"--svg", true, [](Options& o, const std::string&, const std::string& v) { o.svg_file = v; }},
    {"--cluster", true,
     [](Options& o, const std::string&, const std::string& v) {
       TS_CHECK(!v.empty(), "[tessera-shardbench] --cluster expects 8xH100, 8xH200, A100 or ",
                "a cluster file");
       o.cluster = v;
     }},
    {"--gpus", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.gpus.clear();
       for (const std::string& n : split_commas(v)) o.gpus.push_back(parse_int(f, n, 1, kMaxGpus));
       TS_CHECK(!o.gpus.empty(), "[tessera-shardbench] --gpus is empty");
     }},
    {"--sim-model", true,
     [](Options& o, const std::string&, const std::string& v) {
       sim_model_preset(v);  // the error lists the valid names
       o.sim_model = v;
     }},
    {"--global-batch", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.sim.global_batch = parse_int(f, v, 1, kMaxBatch);
     }},
    {"--micro-batch", true,
     [](Options& o, const std::string& f, const std::string& v) {
       o.sim.micro_batch = parse_int(f, v, 1, kMaxBatch);
     }},
    {"--efficiency", true,
     [](Options& o, const std::string&, const std::string& v) {
       o.sim.efficiency = parse_efficiency(v);
     }},
};

// Edits (insert, delete, replace, swap two neighbours) from a to b.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// "; did you mean --simulate?" for a flag two edits or fewer from a known one.
std::string suggestion(const std::string& flag) {
  const Flag* best = nullptr;
  size_t best_distance = 3;
  for (const Flag& f : kFlags) {
    const size_t d = edit_distance(flag, f.name);
    if (d < best_distance) {
      best = &f;
      best_distance = d;
    }
  }
  return best == nullptr ? "" : "; did you mean " + std::string(best->name) + "?";
}

// The first argument CLI11 did not take (it keeps them in order): a misspelt flag, with the known
// one nearest to it, or a stray word.
void refuse_unknown(const std::vector<std::string>& unknown) {
  if (unknown.empty()) return;
  const std::string& arg = unknown.front();
  TS_CHECK(arg.rfind("-", 0) == 0, "[tessera-shardbench] unexpected argument '", arg,
           "'; see --help");
  TS_CHECK(false, "[tessera-shardbench] unknown flag ", arg, suggestion(arg), "; see --help");
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  CLI::App app("tessera-shardbench");
  // --help is a flag of the table (main prints usage()), and the arguments CLI11 does not know are
  // named here, with a suggestion, instead of in its ExtrasError's words.
  app.set_help_flag();
  app.allow_extras();
  for (const Flag& f : kFlags) {
    const std::string name(f.name);
    const Set set = f.set;
    // Set, and its value checked, when CLI11 reaches it: the first mistake on the line is the one
    // said (a misspelt flag before it still comes first, below), and a repeated flag's last value
    // wins.
    (f.takes_value ? app.add_option_function<std::string>(
                         name, [&o, name, set](const std::string& v) { set(o, name, v); })
                   : app.add_flag_callback(name, [&o, name, set] { set(o, name, ""); }))
        ->trigger_on_parse();
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 reads from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ArgumentMismatch&) {
    refuse_unknown(app.remaining());
    // CLI11 runs out of values only at the end of the line: the last argument is the flag
    // ("--steps" or "--steps=").
    const std::string& flag = args.back();
    TS_CHECK(false, "[tessera-shardbench] ", flag.substr(0, flag.find('=')), " expects a value");
  } catch (const CLI::ParseError& e) {
    refuse_unknown(app.remaining());
    TS_CHECK(false, "[tessera-shardbench] ", e.what(), "; see --help");
  } catch (const Error&) {
    refuse_unknown(app.remaining());
    throw;
  }
  refuse_unknown(app.remaining());
  TS_CHECK(o.model.hidden % o.model.heads == 0, "[tessera-shardbench] --heads ", o.model.heads,
           " must divide --hidden ", o.model.hidden);
  return o;
}

namespace {

// The output files are written at the end of a run: a path that cannot take them fails now,
// not after the run (the file itself is not created yet, so that a failed run leaves none).
void check_writable(const char* flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  TS_CHECK(!fs::is_directory(path, ec), "[tessera-shardbench] ", flag, " '", path,
           "' is a folder; valid: a file path");
  const fs::path parent = fs::path(path).parent_path();
  const std::string folder = parent.empty() ? "." : parent.string();
  TS_CHECK(fs::is_directory(folder, ec), "[tessera-shardbench] ", flag, " '", path,
           "': the folder '", folder, "' does not exist; valid: a file in an existing folder");
  const bool exists = fs::exists(path, ec);
  TS_CHECK(access(exists ? path.c_str() : folder.c_str(), W_OK) == 0, "[tessera-shardbench] ", flag,
           " '", path, "': cannot write ", exists ? "the file" : "in the folder '" + folder + "'",
           " (", std::strerror(errno), ")");
}

}  // namespace

void check_output_paths(const Options& o) {
  check_writable("--json", o.json_file);
  if (!o.simulate) check_writable("--svg", o.svg_file);
}

}  // namespace tessera::shardbench
