#pragma once
// Where a rank's local blocks sit in their global tensors, as runtime/ops sees it through
// LocalLayout (runtime/distributed.h): dispatch builds one per call from the placements it chose.

#include <vector>

#include "tessera/dtensor/dtensor_spec.h"
#include "tessera/runtime/distributed.h"

namespace tessera::dtensor {

// The runs of `spec`'s global row-major order that the rank at `coordinate` holds, in its local
// row-major order, adjacent runs merged (a Shard(0) block is one run; a Shard(1) block one per
// row). Replicate and Partial dims hold everything.
std::vector<GlobalRun> global_row_runs(const DTensorSpec& spec,
                                       const std::vector<int64_t>& coordinate);

// One call's layout: the inputs' global shapes with the placements they run with, and the
// outputs' global shapes with the placements the rule gave them. Holds references (the cached
// choice outlives the call); the rank's coordinate is looked up only when asked.
class CallLayout final : public LocalLayout {
 public:
  CallLayout(const char* op, const DeviceMesh& mesh, const std::vector<DTensorSpec>& inputs,
             const std::vector<DTensorSpec>& outputs)
      : op_(op), mesh_(mesh), inputs_(inputs), outputs_(outputs) {}

  int64_t input_offset(size_t input, int64_t dim) const override;
  std::vector<GlobalRun> output_runs(size_t output) const override;
  Shape input_shape(size_t input) const override;
  Shape output_shape(size_t output) const override;
  void agree_generator(Generator& gen) const override;

 private:
  std::vector<int64_t> coordinate() const;

  const char* op_;
  const DeviceMesh& mesh_;
  const std::vector<DTensorSpec>& inputs_;   // an absent input has empty placements
  const std::vector<DTensorSpec>& outputs_;  // empty for replicate-only ops
};

}  // namespace tessera::dtensor
