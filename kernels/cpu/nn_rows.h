#pragma once
// Shared pieces of the CPU nn kernels (softmax, norms, losses): the accumulation type, and
// iteration over "rows" — the trailing block a kernel reduces over — for any strides.
//
// Note [Row kernels]
// A row kernel reduces over a trailing block (or one dim) of every row. Rows are enumerated by
// for_each_row over a view without the reduced dims, so rows of transposed, sliced or expanded
// inputs are found without a copy. A row whose elements are contiguous and already of the
// accumulation type is processed in place; any other row is loaded into a per-thread buffer of
// the accumulation type, processed there, and stored back.

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tessera/kernels/cpu/loops.h"
#include "tessera/runtime/dispatch.h"

namespace tessera::cpu {

// Half, BFloat16 and float compute in float; double in double.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// t without its last `k` dims: element i is the first element of row i. Rows of a zero-size
// trailing block still get a (never dereferenced) pointer.
inline Tensor leading_view(const Tensor& t, int64_t k) {
  const int64_t lead = t.dim() - k;
  Shape sizes(t.sizes().begin(), t.sizes().begin() + lead);
  Shape strides(t.strides().begin(), t.strides().begin() + lead);
  return Tensor::make_view(t.storage(), std::move(sizes), std::move(strides), t.storage_offset(),
                           t.dtype());
}

// Calls f(pointers) once per row of operands sharing one leading shape, in parallel; row_len is
// the work per row, which sizes the chunks handed to threads.
template <size_t N, typename F>
void for_each_row(const std::array<const Tensor*, N>& leads, int64_t row_len, const F& f) {
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(row_len, 1));
  for_each_strided<N>(
      leads,
      [&](std::array<char*, N> p, std::array<int64_t, N> s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          f(p);
          for (size_t k = 0; k < N; ++k) p[k] += s[k];
        }
      },
      grain);
}

// The trailing `k` dims of t as coalesced (size, byte stride) pairs, innermost last; empty when
// the block has a single element.
struct RowLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;

  // Whether the block is one run of adjacent elements of `elem_size` bytes.
  bool contiguous(int64_t elem_size) const {
    return sizes.empty() || (sizes.size() == 1 && strides[0] == elem_size);
  }
};

inline RowLayout row_layout(const Tensor& t, int64_t k) {
  RowLayout r;
  const auto es = static_cast<int64_t>(t.element_size());
  for (int64_t d = t.dim() - k; d < t.dim(); ++d) {
    const int64_t size = t.size(d);
    if (size == 1) continue;
    const int64_t stride = t.stride(d) * es;
    if (!r.sizes.empty() && r.strides.back() == stride * size) {
      r.sizes.back() *= size;
      r.strides.back() = stride;
    } else {
      r.sizes.push_back(size);
      r.strides.push_back(stride);
    }
  }
  return r;
}

// Note [Rows read across the grain]
// A row whose elements are far apart in memory (the rows of a transposed input, or softmax along
// a dim that is not the innermost) is loaded one element per cache line, and each line is
// fetched again for every row it holds an element of: softmax of a transposed 1024 x 1024 float
// matrix took 6.9 ms and layer_norm 7.3 ms, against 0.5 and 0.3 ms for row-major rows. Operands
// of at least kStageRowsMinElements elements whose rows are strided are therefore made into
// row-major rows first by the tiled copy kernel (~0.65 ms for that matrix), an output computed
// into a row-major buffer and copied into place the same way; smaller ones, where the copy's
// call costs more than the strided reads, are read in place. As the elementwise kernels' inputs
// (Note [Inputs read across the grain] in kernels/cpu/elementwise.cpp).
inline constexpr int64_t kStageRowsMinElements = 4096;

// Whether rows of t's trailing k dims are strided and t is large enough to copy first.
inline bool rows_worth_staging(const Tensor& t, int64_t k) {
  return t.numel() >= kStageRowsMinElements &&
         !row_layout(t, k).contiguous(static_cast<int64_t>(t.element_size()));
}

// t itself, or a row-major copy of it (the tiled copy kernel) where rows_worth_staging says so.
inline Tensor rows_in_order(const Tensor& t, int64_t k) {
  if (!rows_worth_staging(t, k)) return t;
  Tensor copy = Tensor::make_empty(t.sizes(), t.dtype(), t.device());
  kernels(DeviceType::CPU, "copy").copy(copy, t);
  return copy;
}

namespace detail {
template <typename P, typename F>
void walk_row(const RowLayout& r, size_t d, P* p, int64_t& i, const F& f) {
  const int64_t n = r.sizes[d];
  const int64_t s = r.strides[d];
  if (d + 1 == r.sizes.size()) {
    for (int64_t j = 0; j < n; ++j) f(p + j * s, i++);
  } else {
    for (int64_t j = 0; j < n; ++j) walk_row(r, d + 1, p + j * s, i, f);
  }
}
}  // namespace detail

// Calls f(element pointer, flat index) over a row at p (a char* or const char*) in row-major
// order.
template <typename P, typename F>
void walk_row(const RowLayout& r, P* p, const F& f) {
  int64_t i = 0;
  if (r.sizes.empty()) {
    f(p, i);
  } else {
    detail::walk_row(r, 0, p, i, f);
  }
}

// Row of T at p -> dst[0, n) of A (and back).
template <typename T, typename A>
void load_row(const RowLayout& r, const char* p, A* dst) {
  walk_row(r, p, [dst](const char* e, int64_t i) {
    dst[i] = static_cast<A>(*reinterpret_cast<const T*>(e));
  });
}
template <typename T, typename A>
void store_row(const RowLayout& r, char* p, const A* src) {
  walk_row(r, p, [src](char* e, int64_t i) { *reinterpret_cast<T*>(e) = static_cast<T>(src[i]); });
}

// A per-thread scratch row of n elements (grows, never shrinks, so steady state allocates
// nothing).
template <typename A>
A* scratch_row(int64_t n, int slot = 0) {
  thread_local std::array<std::vector<A>, 3> bufs;
  auto& b = bufs[static_cast<size_t>(slot)];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Every floating dtype, dispatched to f(T{}).
template <typename F>
void visit_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case kFloat16:
      return f(Half{});
    case kBFloat16:
      return f(BFloat16{});
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    default:
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ", dtype);
  }
}

}  // namespace tessera::cpu
