#pragma once
// Calibration: the cost model tessera-shardbench predicts with, measured on this machine and
// backend — an alpha-beta line per collective kind and group size (a sweep of message sizes),
// float32 GEMM FLOP/s and copy bandwidth, and the model's one-device step. The collective lines
// and the copy bandwidth form a dtensor::CostModel: the tool installs it (set_cost_model) before
// it runs the strategies, so the redistribute planner plans with the same model that predicts.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dtensor/redistribute/cost_model.h"
#include "tools/shardbench/measure.h"

namespace tessera::shardbench {

using dtensor::CollectiveLine;

// Least squares of seconds against bytes, both clamped at >= 0 (a negative intercept from noise
// becomes 0 and the slope is refitted through the origin). Errors: fewer than two points, sizes
// that differ in length.
CollectiveLine fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds);

struct Calibration {
  // A line per collective kind and group size; local_bytes_per_s the copy bandwidth.
  dtensor::CostModel model;
  // float32 matmul 512^3 on the default intra-op threads and on one (a rank thread's share).
  double gemm_flops_per_s = 0.0;
  double gemm_flops_one_thread = 0.0;
  int64_t cores = 1;
  // The model's one-device step on one intra-op thread, as each rank thread computes, at the
  // whole batch and at the batch / ranks share: forward + backward as a line in the batch
  // (a fixed per-step cost, kernel launches and small-op overhead, plus a per-sequence cost).
  Measurement one_thread;
  int64_t batch = 1, small_batch = 1;
  double compute_fixed_s = 0.0, compute_per_sequence_s = 0.0;
  // Forward + backward of `ranks` replicas trained at once on rank threads, each on the batch /
  // ranks share (the slowest rank's median): a DP rank's compute as the machine runs it; and
  // their optimizer steps, each over all the parameters (a DP rank's update).
  double replicated_compute_s = 0.0;
  double replicated_optimizer_s = 0.0;
  // Of a kind on a group size; Error when not calibrated.
  const CollectiveLine& line(const std::string& kind, int64_t group_size) const;
};

// Times the model on one thread and sweeps every collective kind the strategies issue over the
// group sizes of their meshes, in `sessions` runs of rank threads, with messages up to `largest`
// bytes (whole).
Calibration calibrate(const std::vector<Shape>& mesh_shapes, const ModelConfig& c,
                      const RunOptions& run, int64_t ranks, int sessions, int64_t largest);

}  // namespace tessera::shardbench
