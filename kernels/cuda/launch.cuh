#pragma once
// Shared by the CUDA kernel families: grid sizing and strided element addressing.
//
// Note [Strided addressing on the device]
// A kernel over N operands of one shape maps a linear element index to each operand's element
// offset with one OffsetCalc per operand. The host first collapses dims that are contiguous in
// every operand (and drops size-1 dims), so the common cases (contiguous, transposed, broadcast
// rows) need one or two div/mod steps. Up to kMaxDims dims remain after collapsing; more raise
// NotSupportedError naming the op.

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <vector>

#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/cuda/current_stream.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/tensor.h"

namespace tessera::cuda {

inline constexpr int kMaxDims = 10;
inline constexpr int kBlockSize = 256;

// Blocks for n elements with `per_thread` elements each, capped so a grid-stride loop covers the
// rest (the cap keeps launches cheap for huge tensors).
inline unsigned grid_for(int64_t n, int per_thread = 1) {
  const int64_t per_block = int64_t{kBlockSize} * per_thread;
  const int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

// Element offset (in elements, from the tensor's data pointer) of linear index i.
struct OffsetCalc {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};    // innermost first
  int64_t strides[kMaxDims] = {};  // innermost first, in elements

  __host__ __device__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = 0; d < ndim; ++d) {
      const int64_t q = i / sizes[d];
      off += (i - q * sizes[d]) * strides[d];
      i = q;
    }
    return off;
  }
};

// The collapsed iteration space of N operands of shape `sizes`: dims merged where every operand
// is contiguous across the pair, size-1 dims dropped. strides[k] are operand k's strides.
template <int N>
struct CollapsedShape {
  std::vector<int64_t> sizes;                   // outermost first
  std::array<std::vector<int64_t>, N> strides;  // per operand, outermost first
};

template <int N>
CollapsedShape<N> collapse_dims(const Shape& sizes, const std::array<const Tensor*, N>& operands) {
  CollapsedShape<N> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    const bool mergeable = !out.sizes.empty() && [&] {
      for (int k = 0; k < N; ++k) {
        if (out.strides[k].back() != operands[k]->strides()[d] * sizes[d]) return false;
      }
      return true;
    }();
    if (mergeable) {
      out.sizes.back() *= sizes[d];
      for (int k = 0; k < N; ++k) out.strides[k].back() = operands[k]->strides()[d];
    } else {
      out.sizes.push_back(sizes[d]);
      for (int k = 0; k < N; ++k) out.strides[k].push_back(operands[k]->strides()[d]);
    }
  }
  return out;
}

// OffsetCalc of dims given outermost first; raises NotSupportedError past kMaxDims.
inline OffsetCalc offset_calc(const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides, const char* op) {
  const int nd = static_cast<int>(sizes.size());
  TS_CHECK_T(NotSupportedError, nd <= kMaxDims, "[", op, "] CUDA kernels address at most ",
             kMaxDims, " non-mergeable dims, got ", nd,
             "; make the tensor contiguous (.contiguous()) first");
  OffsetCalc calc;
  calc.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    calc.sizes[d] = sizes[static_cast<size_t>(nd - 1 - d)];
    calc.strides[d] = strides[static_cast<size_t>(nd - 1 - d)];
  }
  return calc;
}

// OffsetCalc of operand k of a collapsed shape.
template <int N>
OffsetCalc offset_calc(const CollapsedShape<N>& shape, int k, const char* op) {
  return offset_calc(shape.sizes, shape.strides[k], op);
}

// Typed device pointer to a tensor's first element (storage data + offset).
template <typename T>
T* device_ptr(const Tensor& t) {
  return static_cast<T*>(t.storage()->data()) + t.storage_offset();
}

}  // namespace tessera::cuda
