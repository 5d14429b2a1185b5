#pragma once
// Host-side geometry of a reduction, shared by kernels/cpu/reduction.cpp and
// kernels/cuda/reduction.cu: the kept dims (output order) and the reduced dims (largest stride
// first, so the innermost is last), each with adjacent dims coalesced and size-1 dims dropped.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "tessera/runtime/strided_dims.h"
#include "tessera/runtime/tensor.h"

namespace tessera::detail {

struct ReductionGeometry {
  Dims keep;            // kept dims in output order; the output is contiguous over them
  Dims red;             // reduced dims, smallest stride last (broadcast, stride-0 dims first)
  int64_t num_red = 1;  // reduced positions per output (0 when a reduced dim is empty)
};

// `dims` holds each reduced dim of `in` once.
inline ReductionGeometry reduction_geometry(const Tensor& in, const std::vector<int64_t>& dims) {
  std::vector<bool> reduced(static_cast<size_t>(in.dim()), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(d)] = true;
  ReductionGeometry g;
  std::vector<std::pair<int64_t, int64_t>> red;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (reduced[static_cast<size_t>(d)]) g.num_red *= in.size(d);
    if (in.size(d) == 1) continue;
    if (reduced[static_cast<size_t>(d)]) {
      red.emplace_back(in.size(d), in.stride(d));
    } else {
      g.keep.append(in.size(d), in.stride(d));
    }
  }
  std::stable_sort(red.begin(), red.end(), [](const auto& a, const auto& b) {
    if ((a.second == 0) != (b.second == 0)) return a.second == 0;
    return std::abs(a.second) > std::abs(b.second);
  });
  for (const auto& [size, stride] : red) g.red.append(size, stride);
  return g;
}

}  // namespace tessera::detail
