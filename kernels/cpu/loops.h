#pragma once
// Strided N-operand loops for CPU kernels.
//
// Note [Strided loops]
// Operands share one shape (broadcast inputs carry stride 0). Dims are coalesced where every
// operand is contiguous across them, then the flat index range is split across intra-op threads;
// each thread walks its range as runs along the innermost dim and calls
//   inner(ptrs, byte_strides, n)
// with one pointer and one byte stride per operand. Inner loops test for stride == element size
// (contiguous) or 0 (broadcast scalar) to take vectorized paths, so transposed, sliced and
// expanded inputs never need a hidden full copy.

#include <array>
#include <cstdint>
#include <vector>

#include "tessera/runtime/parallel.h"
#include "tessera/runtime/tensor.h"

namespace tessera::cpu {

template <size_t N>
struct StridedGeometry {
  std::vector<int64_t> sizes;                   // innermost last, after coalescing
  std::vector<std::array<int64_t, N>> strides;  // bytes, per dim per operand
  std::array<char*, N> base{};
};

// Builds coalesced geometry for operands that all have `ts[0]`'s shape.
template <size_t N>
StridedGeometry<N> make_geometry(const std::array<const Tensor*, N>& ts) {
  StridedGeometry<N> g;
  const Shape& shape = ts[0]->sizes();
  for (size_t k = 0; k < N; ++k) g.base[k] = static_cast<char*>(ts[k]->raw_data());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move the pointers
    std::array<int64_t, N> st;
    for (size_t k = 0; k < N; ++k) {
      st[k] = ts[k]->strides()[d] * static_cast<int64_t>(ts[k]->element_size());
    }
    if (!g.sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k) {
        if (g.strides.back()[k] != st[k] * shape[d]) mergeable = false;
      }
      if (mergeable) {
        g.sizes.back() *= shape[d];
        g.strides.back() = st;
        continue;
      }
    }
    g.sizes.push_back(shape[d]);
    g.strides.push_back(st);
  }
  if (g.sizes.empty()) {  // scalar or all-ones shape: one element
    g.sizes.push_back(1);
    g.strides.push_back(std::array<int64_t, N>{});
  }
  return g;
}

// Runs inner over the element range [begin, end) of the flattened geometry.
template <size_t N, typename Inner>
void run_range(const StridedGeometry<N>& g, int64_t begin, int64_t end, const Inner& inner) {
  const int64_t nd = static_cast<int64_t>(g.sizes.size());
  const int64_t inner_size = g.sizes[nd - 1];
  std::vector<int64_t> idx(nd, 0);
  int64_t rem = begin;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[d] = rem % g.sizes[d];
    rem /= g.sizes[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    std::array<char*, N> ptrs = g.base;
    for (int64_t d = 0; d < nd; ++d) {
      for (size_t k = 0; k < N; ++k) ptrs[k] += idx[d] * g.strides[d][k];
    }
    int64_t n = std::min(inner_size - idx[nd - 1], end - pos);
    inner(ptrs, g.strides[nd - 1], n);
    pos += n;
    idx[nd - 1] += n;
    for (int64_t d = nd - 1; d > 0 && idx[d] == g.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// Calls inner over every element of operands with a common shape, in parallel when large.
template <size_t N, typename Inner>
void for_each_strided(const std::array<const Tensor*, N>& ts, const Inner& inner,
                      int64_t grain = kElementwiseGrain) {
  int64_t numel = ts[0]->numel();
  if (numel == 0) return;
  auto g = make_geometry<N>(ts);
  parallel_for(0, numel, grain, [&](int64_t b, int64_t e) { run_range<N>(g, b, e, inner); });
}

}  // namespace tessera::cpu
