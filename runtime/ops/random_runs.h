#pragma once
// Random draws for a block of a larger global tensor (Note [Random ops on distributed tensors] in
// runtime/ops/random.cpp): what dtensor/ and the random ops' distributed paths use so that a
// shard holds exactly the single-device values of its elements.

#include <vector>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/generator.h"
#include "tessera/runtime/tensor.h"

namespace tessera::detail {

enum class RandomFill { kUniform, kNormal };

// Fills the contiguous `out`, the local block holding the elements `runs` of a global tensor of
// `global_numel` elements (in out's row-major order), with the values rand (kUniform) or randn
// (kNormal) give those elements of the global tensor; advances the generator as that
// single-device fill does. Costs the local block's elements plus at most three per run.
void fill_random_runs(const Tensor& out, RandomFill kind, const std::vector<GlobalRun>& runs,
                      int64_t global_numel, Generator* gen);

// dropout of the local block `local` (elements `runs` of a global tensor of `global_numel`
// elements): the single-device dropout's values of those elements, differentiable through the
// local autograd (a product with the drawn mask).
Tensor dropout_runs(const Tensor& local, double p, const std::vector<GlobalRun>& runs,
                    int64_t global_numel, Generator* gen);

}  // namespace tessera::detail
