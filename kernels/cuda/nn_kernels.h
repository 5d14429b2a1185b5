#pragma once
// The nn kernel family on CUDA, split over softmax.cu (softmax and its backward, cross_entropy's
// backward), norm.cu (the norms and their backward) and nn.cu (which registers all nine slots),
// and the row addressing they share. Contracts: runtime/dispatch.h.
//
// Note [CUDA row kernels]
// softmax and the norms reduce over a trailing block of each "row" (softmax: the one dim, moved
// last). The host describes rows with two OffsetCalcs per operand — one over the leading dims
// (row index -> first element) and one over the trailing block (position in the row -> offset)
// — so transposed, sliced and expanded inputs are read where they lie, without a copy.

#include <cstdint>

#include "tessera/kernels/cuda/launch.cuh"
#include "tessera/runtime/dispatch.h"

namespace tessera::cuda {

struct RowOffsets {
  OffsetCalc in_rows, out_rows;    // row index -> offset of the row's first element
  OffsetCalc in_elems, out_elems;  // position within a row -> offset from its first element
  int64_t num_rows = 0;
  int64_t row_len = 0;
};

// Rows of `in` and `out` (equal shapes) made of their last `k` dims (see Note [CUDA row
// kernels]); dims are collapsed where both operands allow it.
RowOffsets row_offsets(const Tensor& in, const Tensor& out, int64_t k, const char* op);

// Address of a device tensor's first element, in bytes (for kernels that pick the element type
// at run time).
inline char* byte_ptr(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) +
         t.storage_offset() * static_cast<int64_t>(t.element_size());
}

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log);
void layer_norm_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, int64_t norm_ndim, double eps);
void rms_norm_kernel(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     int64_t norm_ndim, double eps);
// The one-pass backward kernels (Note [Fused nn backward] in runtime/ops/nn_backward.cpp).
void softmax_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& y, int64_t dim,
                             bool log);
void norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                          const Tensor& grad, const Tensor& in, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd);
void cross_entropy_backward_kernel(const Tensor& out, const Tensor& logits, const Tensor& target,
                                   const Tensor& grad, double scale, int64_t ignore_index,
                                   double label_smoothing);

}  // namespace tessera::cuda
