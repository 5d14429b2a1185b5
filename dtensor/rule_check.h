#pragma once
// Internal: checking a register_sharding rule against the op (RegisterShardingOptions::validate).
//
// Note [Checking user rules]
// Dispatch trusts a rule: one claiming relu(R) -> P(sum) makes full_tensor n times the answer.
// In check mode, the first call that runs with a choice made from a user rule's strategies also
// runs as one device would: the inputs are gathered to all-Replicate before the op runs (an
// in-place op overwrites its input), the op runs on them with the generator where the sharded
// call started (DTensor random ops draw the single-device numbers, so they are checked too),
// and each output, gathered, must equal the whole-tensor result: exactly for integer and boolean
// outputs, for floating ones within the dtype's tolerance scaled by the result's largest
// magnitude (the sharded computation may sum in another order). Every rank compares the same
// gathered tensors, so a wrong rule raises the same Error on every rank. Each choice is checked
// once; a rule right on its first call and wrong later for other shapes is caught at the first
// call with those shapes (a new choice).

#include <memory>
#include <string>
#include <vector>

#include "tessera/dtensor/dtensor_spec.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/generator.h"

namespace tessera::dtensor {

// "[S(0)], absent, [R]": one placement list per tensor, an empty one absent.
std::string describe_placements(const std::vector<Placements>& per_tensor);

// Whether the rules registered with `validate` (or all of them, TESSERA_VALIDATE_SHARDING=1) are
// checked.
bool checking_rule(bool validate_option);

// The whole inputs of a call about to run (absent inputs stay undefined), and where the
// generator stood.
struct WholeCall {
  std::vector<Tensor> inputs;
  uint64_t generator_offset = 0;
};
WholeCall gather_whole_call(const std::vector<Tensor>& locals,
                            const std::vector<std::shared_ptr<const DTensorSpec>>& specs);

// Runs `local` on `whole` as one device would and compares its results with `outputs` (the
// call's DTensor results; for an in-place op, the written DTensor). Errors: a result that
// differs, naming the op, the chosen input and output placements, and the first difference.
void check_rule_result(const char* op, const WholeCall& whole, const std::vector<Tensor>& outputs,
                       const std::vector<Shape>& output_shapes, const DeviceMesh& mesh,
                       const std::vector<Placements>& input_placements,
                       const std::vector<Placements>& output_placements, bool in_place,
                       const LocalOp& local);

}  // namespace tessera::dtensor
