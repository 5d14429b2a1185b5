#include "tools/shardbench/cluster.h"

#include <tessera/tessera.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "tools/shardbench/measured_cluster.h"

namespace tessera::shardbench {

namespace {

constexpr double kGB = 1e9, kTB = 1e12, kUs = 1e-6, kTFLOP = 1e12;

// Ring-step latencies are not datasheet numbers: a few microseconds per NVLink hop and about
// 8 us per InfiniBand hop are what NCCL's small-message all_reduce times on such nodes come to
// (nccl-tests, 8 B, divided by the ring's 2 (N-1) steps). They matter only for small messages
// and very large rings.
constexpr double kNvlinkLatency = 3 * kUs, kIbLatency = 8 * kUs;

Cluster h100() {
  Cluster c;
  c.name = "8xH100";
  c.gpus_per_node = 8;              // DGX/HGX H100: 8 SXM GPUs on NVSwitch
  c.intra_bytes_per_s = 450 * kGB;  // NVLink 4: 900 GB/s bidirectional per GPU (datasheet)
  c.intra_latency_s = kNvlinkLatency;
  c.inter_bytes_per_s = 50 * kGB;  // ConnectX-7 NDR InfiniBand 400 Gb/s per GPU = 50 GB/s
  c.inter_latency_s = kIbLatency;
  c.peak_flops = 989 * kTFLOP;        // H100 SXM datasheet: bf16 dense 989 TFLOP/s
  c.memory_bytes_per_s = 3.35 * kTB;  // H100 SXM datasheet: HBM3 3.35 TB/s
  c.memory_bytes = 80 * kGB;          // H100 SXM datasheet: 80 GB
  return c;
}

Cluster h200() {
  Cluster c = h100();  // the same HGX board, NVLink 4 and NDR NICs
  c.name = "8xH200";
  c.peak_flops = 989 * kTFLOP;       // H200 SXM datasheet: bf16 dense 989 TFLOP/s
  c.memory_bytes_per_s = 4.8 * kTB;  // H200 SXM datasheet: HBM3e 4.8 TB/s
  c.memory_bytes = 141 * kGB;        // H200 SXM datasheet: 141 GB
  return c;
}

Cluster a100() {
  Cluster c;
  c.name = "A100";
  c.gpus_per_node = 8;              // DGX A100: 8 SXM GPUs on NVSwitch
  c.intra_bytes_per_s = 300 * kGB;  // NVLink 3: 600 GB/s bidirectional per GPU (datasheet)
  c.intra_latency_s = kNvlinkLatency;
  c.inter_bytes_per_s = 25 * kGB;  // HDR InfiniBand 200 Gb/s per GPU (DGX A100, Selene)
  c.inter_latency_s = kIbLatency;
  c.peak_flops = 312 * kTFLOP;       // A100 SXM datasheet: bf16 dense 312 TFLOP/s
  c.memory_bytes_per_s = 2.0 * kTB;  // A100 80GB SXM datasheet: 2,039 GB/s
  c.memory_bytes = 80 * kGB;         // A100 80GB SXM
  return c;
}

const std::vector<std::string> kKeys{"name",
                                     "gpus_per_node",
                                     "intra_node_GBps",
                                     "intra_node_latency_us",
                                     "inter_node_GBps",
                                     "inter_node_latency_us",
                                     "bf16_TFLOPs",
                                     "memory_TBps",
                                     "memory_GB",
                                     "compute_efficiency"};

std::string keys_text() {
  std::string s;
  for (const std::string& k : kKeys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The largest value of each key the simulator computes with (its totals in double and int64 stay
// finite and exact): far above any machine built, so only absurd values are refused.
double largest_value(const std::string& key) {
  if (key == "gpus_per_node") return 1 << 16;
  if (key == "intra_node_GBps" || key == "inter_node_GBps") return 1e6;
  if (key == "intra_node_latency_us" || key == "inter_node_latency_us") return 1e9;
  if (key == "bf16_TFLOPs") return 1e6;
  if (key == "memory_TBps") return 1e4;
  if (key == "memory_GB") return 1e7;
  return 1.0;  // compute_efficiency
}

double positive_number(const std::string& where, const std::string& key, const std::string& value) {
  const std::optional<double> parsed = parse_number(value);
  const double v = parsed.value_or(0.0);
  TS_CHECK(v > 0.0, "[tessera-shardbench] ", where, ": ", key, " expects a positive number, got '",
           value, "'");
  TS_CHECK(v <= largest_value(key) && (key != "compute_efficiency" || v >= 1e-6),
           "[tessera-shardbench] ", where, ": ", key, " = ", value, " is out of range; valid: (0, ",
           largest_value(key), "]", key == "compute_efficiency" ? " and at least 1e-06" : "");
  return v;
}

}  // namespace

std::optional<double> parse_number(const std::string& text) {
  size_t used = 0;
  try {
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::vector<std::string> cluster_presets() { return {"8xH100", "8xH200", "A100"}; }

Cluster cluster_preset(const std::string& name) {
  if (name == "8xH100") return h100();
  if (name == "8xH200") return h200();
  if (name == "A100") return a100();
  TS_CHECK(false, "[tessera-shardbench] unknown cluster '", name,
           "'; valid: 8xH100, 8xH200, A100 or a cluster file");
  return {};
}

Cluster cluster_from_file(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "[tessera-shardbench] cannot read cluster file '", path,
           "'; valid --cluster values: 8xH100, 8xH200, A100 or a readable file");
  Cluster c;
  c.name = path;
  std::set<std::string> seen;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(number);
    const size_t eq = line.find('=');
    TS_CHECK(eq != std::string::npos, "[tessera-shardbench] ", where, ": expected 'key = value', ",
             "got '", line, "'; valid keys: ", keys_text());
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    TS_CHECK(std::find(kKeys.begin(), kKeys.end(), key) != kKeys.end(), "[tessera-shardbench] ",
             where, ": unknown key '", key, "'; valid keys: ", keys_text());
    TS_CHECK(seen.insert(key).second, "[tessera-shardbench] ", where, ": ", key, " is given twice");
    if (key == "name") {
      TS_CHECK(!value.empty(), "[tessera-shardbench] ", where, ": name is empty");
      c.name = value;
      continue;
    }
    const double v = positive_number(where, key, value);
    if (key == "gpus_per_node") {
      TS_CHECK(v == static_cast<double>(static_cast<int64_t>(v)), "[tessera-shardbench] ", where,
               ": gpus_per_node expects an integer, got '", value, "'");
      c.gpus_per_node = static_cast<int64_t>(v);
    } else if (key == "intra_node_GBps") {
      c.intra_bytes_per_s = v * kGB;
    } else if (key == "intra_node_latency_us") {
      c.intra_latency_s = v * kUs;
    } else if (key == "inter_node_GBps") {
      c.inter_bytes_per_s = v * kGB;
    } else if (key == "inter_node_latency_us") {
      c.inter_latency_s = v * kUs;
    } else if (key == "bf16_TFLOPs") {
      c.peak_flops = v * kTFLOP;
    } else if (key == "memory_TBps") {
      c.memory_bytes_per_s = v * kTB;
    } else if (key == "memory_GB") {
      c.memory_bytes = v * kGB;
    } else {
      c.compute_efficiency = v;
    }
  }
  for (const std::string& k : kKeys) {
    TS_CHECK(k == "name" || k == "compute_efficiency" || seen.count(k) > 0,
             "[tessera-shardbench] cluster file '", path, "' lacks ", k,
             "; valid keys: ", keys_text());
  }
  return c;
}

Cluster cluster_named(const std::string& name_or_path) {
  for (const std::string& p : cluster_presets()) {
    if (p == name_or_path) return cluster_preset(p);
  }
  if (looks_like_json(name_or_path)) return cluster_from_measured_run(name_or_path);
  return cluster_from_file(name_or_path);
}

}  // namespace tessera::shardbench
