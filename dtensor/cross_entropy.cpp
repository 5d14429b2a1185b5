#include "tessera/dtensor/cross_entropy.h"

#include "tessera/dtensor/dtensor.h"
#include "tessera/runtime/ops.h"

namespace tessera::dtensor {

namespace {
Reduction reduction_of(const OpAttrs& attrs) { return static_cast<Reduction>(attrs.ints[1]); }
}  // namespace

bool reduced_cross_entropy_applies(const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  if (reduction_of(attrs) == Reduction::None) return false;
  for (const Tensor& t : inputs) {
    if (!t.is_distributed()) continue;
    for (const Placement& p : DTensor(t).placements()) {
      if (!p.is_replicate()) return true;
    }
  }
  return false;
}

Tensor reduced_cross_entropy(const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  const Tensor& logits = inputs[0];
  const Tensor& target = inputs[1];
  CrossEntropyOptions options{.ignore_index = attrs.ints[0],
                              .label_smoothing = attrs.reals[0],
                              .reduction = Reduction::None};
  const Tensor total = cross_entropy(logits, target, options).sum();
  if (reduction_of(attrs) == Reduction::Sum) return total;
  // Ignored rows have loss 0 and do not count, as PyTorch's mean; label smoothing divides by the
  // same count.
  const Tensor counted = (target != options.ignore_index).sum().to(total.dtype());
  return total / counted;
}

}  // namespace tessera::dtensor
