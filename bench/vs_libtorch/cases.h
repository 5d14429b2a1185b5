#pragma once
// The cases of vs_libtorch (the table of issue 19): single ops, GEMMs, and training steps.
// Each case builds its inputs once, with the same values on both sides.

#include <tessera/tessera.h>
#include <torch/torch.h>

#include <vector>

#include "bench/vs_libtorch/side_by_side.h"

namespace tessera::bench::vs_libtorch {

// Add of one element (plain, with grad, + sum + backward), 64 MiB add / in-place add / exp /
// sum, t().contiguous() of 4096^2, matmul float32 and bfloat16 at 1024 and 2048.
std::vector<Case> op_cases();

// The MLP step cross_entropy(gelu(X W1) W2) forward + backward (256x512x1024x10) and its parts,
// and a transformer block's step.
std::vector<Case> step_cases();

// A libtorch tensor holding a copy of t's values (float32, bfloat16 or int64).
torch::Tensor to_torch(const Tensor& t);

// max |a - b| / max |b|, a computed by Tessera and b by libtorch.
double relative_difference(const Tensor& a, const torch::Tensor& b);

}  // namespace tessera::bench::vs_libtorch
