#pragma once
// Internal entry points of the nn functions for their backward formulas
// (autograd/formulas/nn*.cpp): forwards that also return what the kernels computed on the way, and
// embedding's scatter-add. Not part of the public API (runtime/ops.h).

#include <cstdint>
#include <optional>
#include <utility>

#include "runtime/generator.h"
#include "runtime/tensor.h"

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

// dropout in training mode with 0 < p <= 1: (output, mask), mask of a's shape and dtype holding
// 0 or 1 / (1 - p) per element, drawn from the same counters as the output.
std::pair<Tensor, Tensor> dropout_with_mask(const Tensor& a, double p, Generator* gen);

}  // namespace tessera::detail
