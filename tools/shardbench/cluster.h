#pragma once
// A GPU cluster that is not here, for tessera-shardbench --simulate: nodes of `gpus_per_node` GPUs
// joined by NVLink/NVSwitch inside a node and InfiniBand between nodes (one NIC per GPU), with
// each GPU's bf16 dense peak, memory bandwidth and capacity. Presets 8xH100, 8xH200 and A100
// (see cluster.cpp for the source of every number); any other cluster from a key=value file.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::shardbench {

struct Cluster {
  std::string name;
  int64_t gpus_per_node = 8;
  double intra_bytes_per_s = 0.0;   // NVLink per GPU, each direction
  double intra_latency_s = 0.0;     // per ring step inside a node
  double inter_bytes_per_s = 0.0;   // InfiniBand per GPU (its own NIC), each direction
  double inter_latency_s = 0.0;     // per ring step between nodes
  double peak_flops = 0.0;          // bf16 dense, per GPU
  double memory_bytes_per_s = 0.0;  // HBM bandwidth per GPU
  double memory_bytes = 0.0;        // HBM capacity per GPU
  // The fraction of peak a training step's compute reaches (GEMMs, attention, norms and
  // elementwise ops together). An assumption, not a datasheet number: see Note [Compute
  // efficiency] in simulate.cpp.
  double compute_efficiency = 0.5;
};

// "8xH100", "8xH200" or "A100". Errors: any other name (the message lists the presets).
Cluster cluster_preset(const std::string& name);
// The whole of `text` as a number; nullopt when it is empty, has characters after the number or
// is out of double's range (the flags' and the cluster files' values).
std::optional<double> parse_number(const std::string& text);

std::vector<std::string> cluster_presets();

// A cluster file: "key = value" lines, '#' comments, blank lines ignored. Keys (units in the
// name): name, gpus_per_node, intra_node_GBps, intra_node_latency_us, inter_node_GBps,
// inter_node_latency_us, bf16_TFLOPs, memory_TBps, memory_GB, compute_efficiency; every key but
// name and compute_efficiency (default 0.5) is required. Errors name the file and line: an
// unknown key (listing the valid ones), a line without '=', a value that is not a positive
// number (compute_efficiency in (0, 1]), a key given twice, a missing key, an unreadable file.
Cluster cluster_from_file(const std::string& path);

// A preset's name, or else a file's path: a measured run's JSON (measured_cluster.h) or a
// cluster file.
Cluster cluster_named(const std::string& name_or_path);

}  // namespace tessera::shardbench
