#include "runtime/shape.h"

#include <algorithm>
#include <limits>

#include "runtime/error.h"

namespace tessera {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t s : *this) n *= s;
  return n;
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    TS_CHECK_SHAPE(s >= 0, "[", op, "] negative dimension ", s, " in shape ", sizes,
                   "; sizes must be >= 0");
    overflow = overflow || __builtin_mul_overflow(n, s, &n);
  }
  // A zero anywhere makes the tensor empty, however large the other sizes.
  const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
  TS_CHECK_SHAPE(empty || !overflow, "[", op, "] shape ", sizes,
                 " has more elements than int64 can count (at most ",
                 std::numeric_limits<int64_t>::max(), ")");
  return empty ? 0 : n;
}

bool has_internal_overlap(const Shape& sizes, const Shape& strides) {
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && strides[d] == 0) return true;
  }
  return false;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TS_CHECK_SHAPE(sa == sb || sa == 1 || sb == 1, "[", op, "] shapes ", a, " and ", b,
                   " cannot be broadcast: size ", sa, " vs ", sb, " at dim ", i,
                   " (sizes must match or one of them must be 1)");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim;
  int64_t hi = ndim == 0 ? 0 : ndim - 1;
  TS_CHECK_INDEX(dim >= lo && dim <= hi, "[", op, "] dimension ", dim,
                 " out of range: expected a dim in [", lo, ", ", hi, "] for a tensor of ", ndim,
                 " dims");
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << fmt::format("{}", s); }

}  // namespace tessera
