#pragma once
// This machine as a cluster for --simulate: the calibration of a measured run (its --json file)
// read as a cluster description, so that a user can ask what this machine would do at other
// sizes. Each of the run's ranks is one "GPU".

#include <string>

#include "tools/shardbench/cluster.h"

namespace tessera::shardbench {

// The cluster of a measured run's JSON (tessera-shardbench --json), from its calibration:
// - gpus_per_node: the run's ranks on one host (its processes there, or its rank threads);
// - the links: the largest group's all_reduce line read as a ring (the simulator's collectives:
//   2 (N-1)/N of the message per rank at the link's bandwidth, 2 (N-1) latency steps), the same
//   between hosts as inside one (a run on one host measures no network: an assumption the
//   cluster's name states);
// - peak_flops: a rank's float32 GEMM rate (the one-thread rate times its intra-op threads);
// - compute_efficiency: the measured one, the model's GEMM FLOPs in one forward + backward over
//   the calibrated one-thread time of that step at the one-thread GEMM rate (at most 1);
// - memory_bytes_per_s and memory_bytes: the host's copy bandwidth and memory shared by its ranks.
// Errors name the file and the key: unreadable, not JSON, a key missing (a JSON of --simulate, or
// of another program), a run whose ranks never communicated (no all_reduce line of a group of
// 2 or more) or whose line has no bandwidth term (one message size timed: a larger model's run
// calibrates one).
Cluster cluster_from_measured_run(const std::string& path);

// Whether `path` is a file whose first non-blank character is '{': a JSON, not a key = value
// cluster file.
bool looks_like_json(const std::string& path);

}  // namespace tessera::shardbench
