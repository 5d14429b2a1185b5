#pragma once
// Internal entry points of the nn functions for their backward formulas
// (autograd/formulas/nn*.cpp): forwards that also return what the kernels computed on the way, and
// embedding's scatter-add. Not part of the public API (runtime/ops.h).

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "tessera/runtime/generator.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"

namespace tessera::detail {

// A norm's output with its per-row statistics, shaped as the input's leading (not normalized)
// dims, contiguous, float32 (float64 for a float64 input). rms_norm leaves mean undefined.
struct NormForward {
  Tensor out;
  Tensor mean;
  Tensor rstd;
};

// layer_norm / rms_norm without recording (callers run them under NoGradGuard when inputs
// require grad); same checks and results as the public entry points.
NormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                               const Tensor& bias, double eps);
NormForward rms_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                             std::optional<double> eps);
// The epsilon rms_norm uses for x's dtype when `eps` is absent (torch's default).
double rms_norm_eps(DType dtype, std::optional<double> eps);

// The gradient of embedding's weight: a [num_weights, D] tensor of grad's dtype whose row r is the
// sum of the rows of grad ([*indices.shape, D]) at the positions where indices equals r
// (repeated indices accumulate). indices are embedding's, already validated. Recorded when grad
// requires grad (its own gradient is embedding of the incoming one).
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights);

// The one-pass backward kernels (Note [Fused nn backward] in runtime/ops/nn_backward.cpp). None
// records: formulas call them when fused_applies and has_fused_nn_backward hold, and compose
// ops otherwise.
//
// Whether t's device has the kernels (CPU and CUDA do).
bool has_fused_nn_backward(const Tensor& t);
// The input gradient of softmax (log: log_softmax) along dim from the forward's result y;
// grad of y's shape (cast to y's dtype).
Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log);
// As softmax_backward, writing the result over grad where gradient_reusable allows (the row
// kernels read a row's gradient before writing it): grad is the caller's last reference to it.
Tensor softmax_backward(Tensor&& grad, const Tensor& y, int64_t dim, bool log);
// The gradients of layer_norm (mean defined) or rms_norm (mean undefined) over x's last
// norm_ndim dims, from the statistics of NormForward: input, weight, bias, each computed only
// when `wanted` (else undefined). weight may be undefined (no affine weight).
struct NormGrads {
  Tensor input;
  Tensor weight;
  Tensor bias;
};
NormGrads norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd, int64_t norm_ndim,
                        std::array<bool, 3> wanted);
// The permutation that moves dim 1, the class dim of [N, C, d...] logits, last: {0, 2, ..., 1}
// for a tensor of `dims` >= 2 dims (cross_entropy's rows, forward and backward).
Shape class_dim_last(int64_t dims);
// The gradient of cross_entropy(logits, target, options) with respect to logits, given the
// loss's incoming gradient (0-dim, or the per-sample shape for Reduction::None). target was
// validated by the forward.
Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target,
                              const CrossEntropyOptions& options);

// dropout in training mode with 0 < p <= 1: (output, mask), mask of a's shape and dtype holding
// 0 or 1 / (1 - p) per element, drawn from the same counters as the output.
std::pair<Tensor, Tensor> dropout_with_mask(const Tensor& a, double p, Generator* gen);

}  // namespace tessera::detail
