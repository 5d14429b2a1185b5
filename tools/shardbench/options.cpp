#include "tools/shardbench/options.h"

#include <sstream>

namespace tessera::shardbench {

namespace {

int64_t parse_int(const std::string& flag, const std::string& value, int64_t min) {
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

}  // namespace

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
                            style colwise | rowwise | sequence, '*' matches one path level
  --steps N                 timed steps per strategy (default 5)
  --warmup N                untimed steps first (default 2)
  --json FILE               write the results as JSON
  --svg FILE                write a chart of measured and predicted step times
  --help                    this text

Per strategy: step time (median, p10-p90; forward / backward / optimizer on rank 0), the step's
collectives alone, the predicted step and its error, peak tensor memory per rank, the largest
loss difference from one device, and the collectives of a step by kind and mesh dim (a line
says when they differ from the strategy's closed-form formula).
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
    TS_CHECK(flag.rfind("--", 0) == 0, "[tessera-shardbench] unexpected argument '", flag,
             "'; see --help");
    TS_CHECK(i + 1 < args.size(), "[tessera-shardbench] ", flag, " expects a value");
    const std::string& value = args[++i];
    if (flag == "--model") {
      TS_CHECK(value == "transformer" || value == "mlp", "[tessera-shardbench] --model expects ",
               "transformer or mlp, got '", value, "'");
      o.model.preset = value;
    } else if (flag == "--layers") {
      o.model.layers = parse_int(flag, value, 1);
    } else if (flag == "--hidden") {
      o.model.hidden = parse_int(flag, value, 1);
    } else if (flag == "--heads") {
      o.model.heads = parse_int(flag, value, 1);
    } else if (flag == "--seq") {
      o.model.seq = parse_int(flag, value, 1);
    } else if (flag == "--batch") {
      o.model.batch = parse_int(flag, value, 1);
    } else if (flag == "--vocab") {
      o.model.vocab = parse_int(flag, value, 2);
    } else if (flag == "--dtype") {
      TS_CHECK(value == "f32" || value == "f64" || value == "bf16",
               "[tessera-shardbench] --dtype expects f32, f64 or bf16, got '", value, "'");
      o.model.dtype = value == "f32" ? kFloat32 : value == "f64" ? kFloat64 : kBFloat16;
    } else if (flag == "--ranks") {
      o.ranks = parse_int(flag, value, 1);
    } else if (flag == "--strategies") {
      o.strategies = split_commas(value);
      TS_CHECK(!o.strategies.empty(), "[tessera-shardbench] --strategies is empty");
    } else if (flag == "--plan") {
      o.plan_file = value;
    } else if (flag == "--steps") {
      o.run.steps = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--warmup") {
      o.run.warmup = static_cast<int>(parse_int(flag, value, 0));
    } else if (flag == "--json") {
      o.json_file = value;
    } else if (flag == "--svg") {
      o.svg_file = value;
    } else {
      TS_CHECK(false, "[tessera-shardbench] unknown flag ", flag, "; see --help");
    }
  }
  TS_CHECK(o.model.hidden % o.model.heads == 0, "[tessera-shardbench] --heads ", o.model.heads,
           " must divide --hidden ", o.model.hidden);
  return o;
}

}  // namespace tessera::shardbench
