#pragma once
// Calibration: the cost model tessera-shardbench predicts with, measured on this machine and
// backend — an alpha-beta line per collective kind and group size (a sweep of message sizes),
// float32 GEMM FLOP/s and copy bandwidth, and the model's one-device step. The collective lines
// and the copy bandwidth form a dtensor::CostModel: the tool installs it (set_cost_model) before
// it runs the strategies, so the redistribute planner plans with the same model that predicts.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessera/dtensor/redistribute/cost_model.h"
#include "tools/shardbench/measure.h"
#include "tools/shardbench/ranks.h"

namespace tessera::shardbench {

using dtensor::CollectiveLine;

// Least squares of seconds against bytes, both clamped at >= 0 (a negative intercept from noise
// becomes 0 and the slope is refitted through the origin). Points of one message size cannot
// tell latency from bandwidth: their mean time is the latency, with no bandwidth term (the
// calibration times one size only when the strategies' messages average at most its smallest,
// 16 KiB, where latency is most of the time). Errors: no point, sizes that differ in length.
CollectiveLine fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds);

// One thread's forward + backward as a line in the batch: a fixed per-step cost (small ops,
// their dispatch) plus a cost per sequence.
struct ComputeLine {
  double fixed_s = 0.0, per_sequence_s = 0.0;
  double seconds(double batch) const { return fixed_s + per_sequence_s * batch; }
};

// A rank of t-way tensor parallelism computing on `batch` sequences, holding 1/t of `parts`.
struct TensorParallelShare {
  int64_t degree = 1;
  int64_t batch = 1;
  ShardedParts parts;
  auto operator<=>(const TensorParallelShare&) const = default;
};

struct Calibration {
  // Where the ranks ran (threads or processes), as calibrated and measured.
  RankSetup ranks;
  // A line per collective kind and group size; local_bytes_per_s the copy bandwidth.
  dtensor::CostModel model;
  // float32 matmul 512^3 on the default intra-op threads and on one (a rank thread's share); this
  // and pointwise_speedup are medians over the compute rounds (set_compute).
  double gemm_flops_per_s = 0.0;
  double gemm_flops_one_thread = 0.0;
  int64_t cores = 1;
  // This machine's memory (machine_memory_bytes), for a cluster made of this run's calibration.
  double host_memory_bytes = 0.0;
  // How much faster the default intra-op threads run a pointwise op (gelu) on the model's
  // activations than one thread does: the speedup of the work in a step that is not a GEMM.
  double pointwise_speedup = 1.0;
  // The model's one-device step on one intra-op thread, as each rank thread computes, at the
  // whole batch and at the batch / ranks share: forward + backward as a line in the batch.
  Measurement one_thread;
  int64_t batch = 1, small_batch = 1;
  ComputeLine compute;
  // A tensor-parallel rank's share of the model (tensor_parallel_share: narrower GEMMs, and the
  // norms, residuals, embedding and loss every rank repeats) trained on every rank thread at
  // once on the batch such a rank computes, each under the TP plan on a mesh of its own rank
  // (the DTensor dispatch a rank pays, no communication): forward + backward, the slowest rank's
  // median. Per share the strategies have.
  std::map<TensorParallelShare, double> tp_share_s;
  // Forward + backward of `ranks` replicas trained at once on the ranks, each on the batch /
  // ranks share (the slowest rank's median): a DP rank's compute as the machine runs it; and
  // their optimizer steps, each over all the parameters (a DP rank's update).
  double replicated_compute_s = 0.0;
  double replicated_optimizer_s = 0.0;
  // What the lines could not fit, for the report: groups of one rank (no communication, a line
  // of zeros) and groups timed at one message size (latency only).
  std::vector<std::string> notes;
  // Of a kind on a group size; Error when not calibrated.
  const CollectiveLine& line(const std::string& kind, int64_t group_size) const;
};

// Sweeps every collective kind the strategies issue over the group sizes of their meshes, in
// `sessions` runs of the ranks, with messages up to `largest` bytes (whole), and times the
// copy bandwidth. Groups of one rank get lines of zeros (a collective on them moves nothing) and
// are not timed; a sweep whose sizes all come out equal fits latency only (fit_alpha_beta). Both
// are said in `notes`. The compute figures come from set_compute.
Calibration calibrate(const std::vector<Shape>& mesh_shapes, int sessions, int64_t largest);

// One round's timings of the compute the predictions stand on: the model on one thread at the
// whole batch and at the batch / ranks share, replicas of it on every rank thread at once (each on
// the share), replicas of each tensor-parallel share, and the GEMM's and a pointwise op's (gelu on
// `c`'s activations) speedup on the default intra-op threads over one. The tool takes one per
// round, beside the strategies' rounds, so that the machine's drifts weigh on them alike.
struct ComputeRound {
  Measurement one_thread, one_thread_share, replicas;
  std::map<TensorParallelShare, Measurement> tp_shares;
  // As Calibration's fields of these names, from this round.
  double gemm_flops_per_s = 0.0, gemm_flops_one_thread = 0.0, pointwise_speedup = 1.0;
};
ComputeRound time_compute(const ModelConfig& c, const RunOptions& run, int64_t ranks,
                          const std::set<TensorParallelShare>& tp_shares);
// The compute figures of `cal` from the rounds' medians.
void set_compute(Calibration& cal, const ModelConfig& c, int64_t ranks,
                 const std::vector<ComputeRound>& rounds);

}  // namespace tessera::shardbench
