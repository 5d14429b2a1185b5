#pragma once
// Prediction: a strategy's collectives in closed form (the formulas a reader can check: DP
// all_reduces every gradient, FSDP all_gathers every padded flat unit forward and backward and
// reduce_scatters it once, TP all_reduces activations per layer, ...) and its step time from the
// calibrated cost model: compute from what each rank computes, timed on the same rank threads
// (Note [Predicting a step]), plus every collective on its alpha-beta line (the threads backend
// does not overlap communication with compute).

#include <optional>
#include <vector>

#include "tools/shardbench/calibrate.h"

namespace tessera::shardbench {

// Rank 0's collectives of one training step, by kind and mesh dim (as measure() records them).
std::vector<CollectiveTotal> expected_collectives(const Strategy& s, const ModelConfig& c);

struct Prediction {
  double compute_s = 0.0;
  double comm_s = 0.0;
  double local_s = 0.0;  // packing and unpacking the collectives' messages (copies)
  double step_s() const { return compute_s + comm_s + local_s; }
};

// The share a rank of `s` computes when `s` has tensor parallelism (TP, SP, FSDP x TP, an
// explicit plan): the tensor-parallel degree, the rank's batch and the parts it shards whole (a
// plan's may be none: its rank then computes the whole model).
std::optional<TensorParallelShare> tensor_parallel_share_of(const Strategy& s,
                                                            const ModelConfig& c);

// `collectives`: rank 0's of a step, the closed form (expected_collectives) of a built-in
// strategy, those traced in the measured steps of an explicit plan.
Prediction predict(const Strategy& s, const ModelConfig& c, const Calibration& cal,
                   const std::vector<CollectiveTotal>& collectives);

}  // namespace tessera::shardbench
