#pragma once
// Internal: a strided layout as (size, element stride) pairs with adjacent dims merged where the
// outer one steps exactly over the inner one. Shared by the reductions' geometry
// (kernels/reduction_geometry.h) and the threads backend's strided runs
// (collectives/threads/strided_runs.h).

#include <cstdint>
#include <vector>

namespace tessera::detail {

// (size, element stride) pairs, outer to inner.
struct Dims {
  std::vector<int64_t> sizes, strides;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  // Adds an inner dim, merged into the current innermost when that one steps over it exactly.
  void append(int64_t size, int64_t stride) {
    if (!sizes.empty() && strides.back() == stride * size) {
      sizes.back() *= size;
      strides.back() = stride;
    } else {
      sizes.push_back(size);
      strides.push_back(stride);
    }
  }
  Dims without_last() const {
    Dims d = *this;
    d.sizes.pop_back();
    d.strides.pop_back();
    return d;
  }
};

}  // namespace tessera::detail
