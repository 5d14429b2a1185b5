#pragma once
// Internal: Partial inputs that meet a factor which is not finite (issue 52, row 5).
//
// Note [Partial times a factor that is not finite]
// mul, div and matmul keep a Partial(sum/avg) input Partial beside a Replicate operand
// (Note [Partial linearity] in dtensor/rules/pointwise.cpp), which is exact for finite factors
// only: where a rank's part is 0, 0 * inf and 0 / 0 make NaN, and the reduced NaN differs from
// the single-device inf. The rule sees specs, not data, so dispatch checks the data of each
// Replicate operand beside a Partial input before running: a factor holding inf or NaN (for a
// divisor, also 0) makes the call reduce its Partial inputs first and run again (the Partial
// strategies are then not offered). The operand is the same on every rank of the Partial mesh
// dim's group; where it is sharded along another mesh dim, the verdict is agreed by a one-element
// all_reduce over those mesh dims, so every rank of the mesh takes the same way. The cost is one
// read of the operand, only for calls that run a Partial beside a Replicate operand
// (bench/dtensor_ops_bench.cpp, "Partial times Replicate").

#include <cstdint>
#include <vector>

#include "tessera/dtensor/dtensor_spec.h"

namespace tessera::dtensor {

enum class PartialFactors : uint8_t {
  kNone,     // the op's Partial strategies hold for every value
  kFactors,  // mul, matmul: the operand beside a Partial input must be finite
  kDivisor,  // div: input 1, beside a Partial input 0, must be finite and non-zero
};

// Whether a call about to run with `run_placements` (per input; empty for an absent input) on
// these local tensors must reduce its Partial inputs first (the Note). Every rank of the mesh
// returns the same.
bool partials_meet_bad_factor(PartialFactors kind, const std::vector<Placements>& run_placements,
                              const std::vector<Tensor>& run_locals, const DeviceMesh& mesh);

}  // namespace tessera::dtensor
