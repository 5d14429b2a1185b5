#include "tessera/dtensor/local_layout.h"

#include "tessera/dtensor/generator_sync.h"

namespace tessera::dtensor {

std::vector<GlobalRun> global_row_runs(const DTensorSpec& spec,
                                       const std::vector<int64_t>& coordinate) {
  const Shape& shape = spec.shape;
  const size_t nd = shape.size();
  if (nd == 0) return {GlobalRun{0, 1}};
  const std::vector<std::vector<Run>> runs = spec.global_runs(coordinate);
  const Shape strides = contiguous_strides(shape);
  std::vector<GlobalRun> out;
  auto add = [&out](int64_t start, int64_t length) {
    if (length == 0) return;
    if (!out.empty() && out.back().start + out.back().length == start) {
      out.back().length += length;
    } else {
      out.push_back({start, length});
    }
  };
  // Depth-first over the runs of the leading dims; the last dim's runs are the pieces.
  auto walk = [&](auto& self, size_t d, int64_t base) -> void {
    for (const Run& r : runs[d]) {
      if (d + 1 == nd) {
        add(base + r.offset * strides[d], r.size);
        continue;
      }
      for (int64_t i = r.offset; i < r.offset + r.size; ++i)
        self(self, d + 1, base + i * strides[d]);
    }
  };
  walk(walk, 0, 0);
  return out;
}

std::vector<int64_t> CallLayout::coordinate() const {
  const auto coord = mesh_.get_coordinate();
  TS_INTERNAL_ASSERT(coord.has_value(), "[", op_, "] ran on a rank outside its mesh");
  return *coord;
}

int64_t CallLayout::input_offset(size_t input, int64_t dim) const {
  TS_INTERNAL_ASSERT(input < inputs_.size() && !inputs_[input].placements.empty(), "[", op_,
                     "] asked for the layout of absent input ", input);
  const DTensorSpec& spec = inputs_[input];
  const std::vector<std::vector<Run>> runs = spec.global_runs(coordinate());
  const auto& along = runs.at(static_cast<size_t>(dim));
  TS_CHECK(along.size() <= 1, "[", op_, "] needs input ", input,
           "'s local block to be one range of dim ", dim, ", but its placements ", spec.placements,
           " give this rank ", along.size(),
           " ranges (a StridedShard); redistribute it to Shard or Replicate first");
  return along.empty() ? 0 : along[0].offset;
}

std::vector<GlobalRun> CallLayout::output_runs(size_t output) const {
  TS_INTERNAL_ASSERT(output < outputs_.size(), "[", op_, "] asked for the runs of output ", output,
                     " of ", outputs_.size(), " (replicate-only ops have no layout)");
  return global_row_runs(outputs_[output], coordinate());
}

Shape CallLayout::input_shape(size_t input) const {
  TS_INTERNAL_ASSERT(input < inputs_.size(), "[", op_, "] asked for the shape of input ", input,
                     " of ", inputs_.size());
  return inputs_[input].shape;
}

Shape CallLayout::output_shape(size_t output) const {
  TS_INTERNAL_ASSERT(output < outputs_.size(), "[", op_, "] asked for the shape of output ", output,
                     " of ", outputs_.size());
  return outputs_[output].shape;
}

void CallLayout::agree_generator(Generator& gen) const { dtensor::agree_generator(mesh_, gen); }

}  // namespace tessera::dtensor
