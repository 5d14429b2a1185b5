// Reductions over a set of dims: sum, prod, mean, amax/amin, argmax/argmin, var, norm.
//
// Note [Reduction loops]
// The input (any strides) is read where it lies, never copied, and reduced into the contiguous
// keepdim-shaped output. Size-1 dims are dropped, the reduced dims are ordered by decreasing
// stride (stride-0 ones outermost) and adjacent dims are coalesced, so that e.g. reducing a
// transposed tensor over all dims is one contiguous run. Then one of two loops runs:
//  - inner: the innermost reduced dim has the smallest stride. Each output reduces runs along it;
//    contiguous runs go through kLanes independent accumulators (vectorized by the compiler) in
//    blocks whose results feed a Cascade, so float sums lose O(log n) ulps rather than O(n).
//    Many outputs: parallel over outputs; few: each output's range is split across threads.
//  - outer: a kept dim has the smallest stride (e.g. sum over dim 0 of a contiguous [N, M]). Rows
//    of up to kTileOf outputs are accumulated lane-wise (vectorized over the kept dim) with a
//    cascade over rows; parallel over tiles, or over row ranges when there are few tiles.
// A Reducer says what is accumulated: init(output) (its identity; var's carries the mean),
// step(acc, x, index along the reduced dims), merge(acc, acc) (order-free, so argmax breaks ties
// by index), finish(acc, count).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/reduction_geometry.h"
#include "tessera/runtime/parallel.h"

namespace tessera::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int kWideLanes = 64;        // a contiguous sum's lanes (See reduce_lanes)
constexpr int64_t kBlock = 2048;      // elements reduced by the lanes before entering the cascade
constexpr int kFan = 16;              // cascade entries merged at a level before carrying up
constexpr int kLevels = 6;            // scalar cascade levels (the top one is unbounded)
constexpr int kLaneLevels = 4;        // lane cascade levels
constexpr int64_t kRowBlock = 64;     // outer loop: rows added per lane before carrying up
constexpr int64_t kTileBytes = 8192;  // outer loop: accumulators per task (one L1-resident row)
constexpr int64_t kGrain = 32768;     // input elements per parallel task, at least

// Outputs per task of the outer loop.
template <typename Acc>
inline constexpr int64_t kTileOf = std::max<int64_t>(16, kTileBytes / sizeof(Acc));

template <typename T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Accumulation type: float for float16/bfloat16/float32, double for float64, and wrapping
// uint64 for integers (sum/prod give int64, overflowing as PyTorch's do, without UB).
template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double,
                                 std::conditional_t<kIsFloat<T>, float, uint64_t>>;
// Comparison type of amax/argmax: floats compare in float, integers as themselves, bool as
// uint8 (so that accumulator arrays are not std::vector<bool>).
template <typename T>
using CmpOf = std::conditional_t<kIsFloat<T>, AccOf<T>,
                                 std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;

template <typename V>
bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}

// x replaces a when it is larger (kMax) or smaller, or NaN: NaN wins, as in PyTorch. `|`, not
// `||`: a branch-free select is what lets GCC vectorize the loops below.
template <bool kMax, typename V>
V pick(V a, V x) {
  const bool better = kMax ? x > a : x < a;
  return (better | is_nan(x)) ? x : a;
}

template <typename V>
V lowest_or_highest(bool lowest) {
  if constexpr (std::numeric_limits<V>::has_infinity) {
    return lowest ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  } else {
    return lowest ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
  }
}

// Reducers whose step selects (max/min) declare kSelects = true.
template <typename R>
inline constexpr bool kSelects = requires {
  requires R::kSelects;
};

// Reduces n elements p[i * stride] with kLanes independent accumulators, folded at the end.
// Unrolled, the lanes live in registers (fast sums), but GCC turns selects into branches; so the
// lane loop of selecting reducers stays a loop for the vectorizer to if-convert.
template <bool kContiguous, typename R>
typename R::Acc reduce_lanes(const R& r, const typename R::Acc& identity, const typename R::In* p,
                             int64_t stride, int64_t n, int64_t i0) {
  using Acc = typename R::Acc;
  auto at = [&](int64_t i) {
    if constexpr (kContiguous) {
      return p[i];
    } else {
      return p[i * stride];
    }
  };
  Acc lanes[kWideLanes];
  std::fill_n(lanes, kWideLanes, identity);
  int64_t i = 0;
  if constexpr (kContiguous && !kSelects<R>) {
    // A contiguous sum's lanes are several vectors wide (four under AVX-512), so that its adds
    // form independent chains: summing 64 MiB on one thread of an Intel Xeon took 2.53 ms with
    // one chain of AVX-512 adds and 2.32 ms with four, the core's streaming rate and libtorch's
    // time (bench/history/2026-12.md, 2026-12-04).
    for (; i + kWideLanes <= n; i += kWideLanes) {
      for (int j = 0; j < kWideLanes; ++j) r.step(lanes[j], at(i + j), i0 + i + j);
    }
    for (int q = 1; q < kWideLanes / kLanes; ++q) {
      for (int j = 0; j < kLanes; ++j) r.merge(lanes[j], lanes[q * kLanes + j]);
    }
  }
  for (; i + kLanes <= n; i += kLanes) {
    if constexpr (kSelects<R>) {
#pragma GCC unroll 1
      for (int j = 0; j < kLanes; ++j) r.step(lanes[j], at(i + j), i0 + i + j);
    } else {
      for (int j = 0; j < kLanes; ++j) r.step(lanes[j], at(i + j), i0 + i + j);
    }
  }
  for (; i < n; ++i) r.step(lanes[0], at(i), i0 + i);
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) r.merge(lanes[j], lanes[j + w]);
  }
  return lanes[0];
}

// NaN-propagating max (kMax) or min of n contiguous numbers. GCC does not vectorize a select
// that also tests for NaN, so this one spells out its vectors (GCC/Clang vector extension):
// kAcc independent vector accumulators, and a NaN mask kept off their dependency chains.
template <bool kMax, typename T>
T extreme_simd(T identity, const T* p, int64_t n) {
  typedef T Vec __attribute__((vector_size(16)));  // SSE2, the x86-64 baseline
  constexpr int kWidth = sizeof(Vec) / sizeof(T);
  constexpr int kAcc = 8;
  Vec acc[kAcc];
  for (Vec& a : acc) a = Vec{} + identity;
  auto nan = acc[0] != acc[0];
  int64_t i = 0;
  for (; i + kAcc * kWidth <= n; i += kAcc * kWidth) {
    for (int k = 0; k < kAcc; ++k) {
      Vec x;
      std::memcpy(&x, p + i + k * kWidth, sizeof(Vec));
      acc[k] = (kMax ? x > acc[k] : x < acc[k]) ? x : acc[k];
      nan |= x != x;
    }
  }
  T r = identity;
  for (int j = 0; j < kWidth; ++j) {
    if (nan[j]) return std::numeric_limits<T>::quiet_NaN();
    for (int k = 0; k < kAcc; ++k) r = pick<kMax>(r, acc[k][j]);
  }
  for (; i < n; ++i) r = pick<kMax>(r, p[i]);
  return r;
}

template <typename R>
concept HasBlock = requires(const R& r, const typename R::Acc& a, const typename R::In* p) {
  r.block(a, p, int64_t{}, int64_t{});
};

// Reduces n contiguous elements p[i], the first of index i0.
template <typename R>
typename R::Acc reduce_contiguous(const R& r, const typename R::Acc& identity,
                                  const typename R::In* p, int64_t n, int64_t i0) {
  if constexpr (HasBlock<R>) {
    return r.block(identity, p, n, i0);
  } else {
    return reduce_lanes<true>(r, identity, p, 1, n, i0);
  }
}

// ---- reducers (see Note [Reduction loops]) ----
// A reducer whose Acc is a struct also has block(identity, p, n, i0), reducing a contiguous block
// in a form the compiler can vectorize.

template <typename T, typename O, bool kProd, bool kMean>
struct SumReducer {
  using In = T;
  using Acc = AccOf<T>;
  using Out = O;
  Acc init(int64_t) const { return Acc(kProd ? 1 : 0); }
  void step(Acc& a, T x, int64_t) const { merge(a, static_cast<Acc>(x)); }
  void merge(Acc& a, const Acc& b) const {
    if constexpr (kProd) {
      a *= b;
    } else {
      a += b;
    }
  }
  Out finish(const Acc& a, int64_t n) const {
    if constexpr (kMean) {
      return static_cast<Out>(a / static_cast<Acc>(n));
    } else {
      return static_cast<Out>(a);
    }
  }
};

template <typename T, bool kMax>
struct ExtremeReducer {
  using In = T;
  using Acc = CmpOf<T>;
  using Out = T;
  static constexpr bool kSelects = true;
  Acc init(int64_t) const { return lowest_or_highest<Acc>(kMax); }
  void step(Acc& a, T x, int64_t) const { a = pick<kMax>(a, static_cast<Acc>(x)); }
  void merge(Acc& a, const Acc& b) const { a = pick<kMax>(a, b); }
  Out finish(const Acc& a, int64_t) const { return static_cast<Out>(a); }
  Acc block(const Acc& identity, const T* p, int64_t n,
            int64_t) const requires std::is_same_v<T, Acc> {
    return extreme_simd<kMax>(identity, p, n);
  }
};

template <typename T, bool kMax>
struct ArgReducer {
  using In = T;
  using V = CmpOf<T>;
  struct Acc {
    V v;
    int64_t i;  // -1: nothing seen yet
  };
  using Out = int64_t;
  Acc init(int64_t) const { return {lowest_or_highest<V>(kMax), -1}; }
  static bool better(V x, V y) { return (kMax ? x > y : x < y) || (is_nan(x) && !is_nan(y)); }
  void step(Acc& a, T x, int64_t i) const {
    const V v = static_cast<V>(x);
    if (a.i < 0 || better(v, a.v)) a = {v, i};
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.i < 0) return;
    const bool same = a.v == b.v || (is_nan(a.v) && is_nan(b.v));
    if (a.i < 0 || better(b.v, a.v) || (same && b.i < a.i)) a = b;
  }
  Out finish(const Acc& a, int64_t) const { return a.i; }
  // The block's extreme (vectorized), then the first position holding it.
  Acc block(const Acc&, const T* p, int64_t n, int64_t i0) const {
    const ExtremeReducer<T, kMax> extreme;
    const V m = reduce_contiguous(extreme, extreme.init(0), p, n, 0);
    int64_t i = 0;
    if (is_nan(m)) {
      while (!is_nan(static_cast<V>(p[i]))) ++i;
    } else {
      while (static_cast<V>(p[i]) != m) ++i;
    }
    return {m, i0 + i};
  }
};

// Second pass of var: sums of d = x - mean and d^2, so that the mean's own rounding error cancels
// (m2 = sum d^2 - (sum d)^2 / n), stable for data with a large mean.
template <typename T>
struct VarReducer {
  using In = T;
  using A = AccOf<T>;
  struct Acc {
    A mean, s1, s2;
  };
  using Out = T;
  const A* means;
  double correction;
  Acc init(int64_t o) const { return {means[o], A(0), A(0)}; }
  void step(Acc& a, T x, int64_t) const {
    const A d = static_cast<A>(x) - a.mean;
    a.s1 += d;
    a.s2 += d * d;
  }
  void merge(Acc& a, const Acc& b) const {
    a.s1 += b.s1;
    a.s2 += b.s2;
  }
  Acc block(const Acc& identity, const T* p, int64_t n, int64_t) const {
    A s1[kLanes] = {}, s2[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const A d = static_cast<A>(p[i + j]) - identity.mean;
        s1[j] += d;
        s2[j] += d * d;
      }
    }
    Acc a = identity;
    for (; i < n; ++i) step(a, p[i], i);
    for (int j = 0; j < kLanes; ++j) merge(a, {identity.mean, s1[j], s2[j]});
    return a;
  }
  Out finish(const Acc& a, int64_t n) const {
    A m2 = a.s2 - a.s1 * a.s1 / static_cast<A>(n);
    if (m2 < A(0)) m2 = A(0);  // rounding; keeps NaN
    const double dof =
        static_cast<double>(n) > correction ? static_cast<double>(n) - correction : 0.0;
    return static_cast<Out>(m2 / static_cast<A>(dof));
  }
};

enum class NormKind { kZero, kOne, kTwo, kInf, kNegInf, kGeneral };

template <typename T, NormKind kKind>
struct NormReducer {
  using In = T;
  using Acc = AccOf<T>;
  using Out = T;
  static constexpr bool kExtreme = kKind == NormKind::kInf || kKind == NormKind::kNegInf;
  static constexpr bool kSelects = kExtreme;
  Acc p;
  Acc init(int64_t) const {
    return kKind == NormKind::kNegInf ? std::numeric_limits<Acc>::infinity() : Acc(0);
  }
  void step(Acc& a, T x, int64_t) const {
    const Acc v = static_cast<Acc>(x);
    if constexpr (kKind == NormKind::kZero) {
      a += v != Acc(0) ? Acc(1) : Acc(0);
    } else if constexpr (kKind == NormKind::kOne) {
      a += std::abs(v);
    } else if constexpr (kKind == NormKind::kTwo) {
      a += v * v;
    } else if constexpr (kExtreme) {
      merge(a, std::abs(v));
    } else {
      a += std::pow(std::abs(v), p);
    }
  }
  void merge(Acc& a, const Acc& b) const {
    if constexpr (kExtreme) {
      a = pick<kKind == NormKind::kInf>(a, b);
    } else {
      a += b;
    }
  }
  Out finish(const Acc& a, int64_t) const {
    if constexpr (kKind == NormKind::kTwo) {
      return static_cast<Out>(std::sqrt(a));
    } else if constexpr (kKind == NormKind::kGeneral) {
      return static_cast<Out>(std::pow(a, Acc(1) / p));
    } else {
      return static_cast<Out>(a);
    }
  }
};

// ---- geometry ----

using detail::Dims;

struct Geometry {
  Dims keep;  // kept dims in output order; the output is contiguous over them
  Dims red;   // reduced dims, innermost (smallest stride) last; never empty
};

Geometry make_geometry(const Tensor& in, const std::vector<int64_t>& dims) {
  detail::ReductionGeometry r = detail::reduction_geometry(in, dims);
  Geometry g{std::move(r.keep), std::move(r.red)};
  if (g.red.sizes.empty()) g.red.append(1, 0);
  return g;
}

// Element offsets of consecutive row-major positions of a Dims, without division per step.
class Odometer {
 public:
  explicit Odometer(const Dims& d) : d_(d), idx_(d.sizes.size(), 0) {}
  void seek(int64_t pos) {
    offset_ = 0;
    for (size_t k = idx_.size(); k-- > 0;) {
      idx_[k] = pos % d_.sizes[k];
      pos /= d_.sizes[k];
      offset_ += idx_[k] * d_.strides[k];
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t k = idx_.size(); k-- > 0;) {
      offset_ += d_.strides[k];
      if (++idx_[k] < d_.sizes[k]) return;
      offset_ -= d_.strides[k] * d_.sizes[k];
      idx_[k] = 0;
    }
  }

 private:
  const Dims& d_;
  std::vector<int64_t> idx_;
  int64_t offset_ = 0;
};

// ---- inner loop: runs along the innermost reduced dim ----

template <typename R>
class Cascade {
 public:
  using Acc = typename R::Acc;
  Cascade(const R& r, const Acc& identity) : r_(r), identity_(identity) { levels_.fill(identity); }
  void add(const Acc& v) {
    r_.merge(levels_[0], v);
    for (int k = 0; k + 1 < kLevels && ++counts_[k] == kFan; ++k) {
      r_.merge(levels_[k + 1], levels_[k]);
      levels_[k] = identity_;
      counts_[k] = 0;
    }
  }
  Acc result() const {
    Acc a = levels_[kLevels - 1];
    for (int k = kLevels - 1; k-- > 0;) r_.merge(a, levels_[k]);
    return a;
  }

 private:
  const R& r_;
  Acc identity_;
  std::array<Acc, kLevels> levels_;
  std::array<int, kLevels> counts_{};
};

// Reduces a run of n <= kBlock elements p[i * stride] whose first has index i0.
template <typename R>
typename R::Acc reduce_run(const R& r, const typename R::Acc& identity, const typename R::In* p,
                           int64_t stride, int64_t n, int64_t i0) {
  if (n < kLanes) {
    typename R::Acc a = identity;
    for (int64_t i = 0; i < n; ++i) r.step(a, p[i * stride], i0 + i);
    return a;
  }
  if (stride != 1) return reduce_lanes<false>(r, identity, p, stride, n, i0);
  return reduce_contiguous(r, identity, p, n, i0);
}

// Reduces the flat reduced positions [b, e) of one output whose first element is `base`;
// `outer` walks the reduced dims but the innermost.
template <typename R>
typename R::Acc reduce_positions(const R& r, const typename R::Acc& identity,
                                 const typename R::In* base, const Dims& red, Odometer& outer,
                                 int64_t b, int64_t e) {
  const int64_t n = red.sizes.back();
  const int64_t stride = red.strides.back();
  if (red.sizes.size() == 1 && e - b <= kBlock) {
    return reduce_run(r, identity, base + b * stride, stride, e - b, b);
  }
  Cascade<R> c(r, identity);
  outer.seek(b / n);
  for (int64_t pos = b; pos < e; outer.next()) {
    const int64_t end = pos + std::min(n - pos % n, e - pos);
    const typename R::In* run = base + outer.offset();
    while (pos < end) {
      const int64_t len = std::min(kBlock, end - pos);
      c.add(reduce_run(r, identity, run + (pos % n) * stride, stride, len, pos));
      pos += len;
    }
  }
  return c.result();
}

template <typename R>
void run_inner(const R& r, typename R::Out* out, const typename R::In* in, const Geometry& g) {
  const int64_t num_out = g.keep.numel();
  const int64_t num_red = g.red.numel();
  const Dims red_outer = g.red.without_last();
  const int64_t threads = get_num_threads();
  if (num_out >= 2 * threads || num_red < 2 * kGrain) {
    parallel_for(0, num_out, std::max<int64_t>(1, kGrain / num_red), [&](int64_t o0, int64_t o1) {
      Odometer keep(g.keep), outer(red_outer);
      keep.seek(o0);
      if (red_outer.sizes.empty() && num_red < kLanes) {  // tiny runs: no calls per output
        const int64_t stride = g.red.strides[0];
        for (int64_t o = o0; o < o1; ++o, keep.next()) {
          auto acc = r.init(o);
          const typename R::In* p = in + keep.offset();
          for (int64_t i = 0; i < num_red; ++i) r.step(acc, p[i * stride], i);
          out[o] = r.finish(acc, num_red);
        }
        return;
      }
      for (int64_t o = o0; o < o1; ++o, keep.next()) {
        const auto acc =
            reduce_positions(r, r.init(o), in + keep.offset(), g.red, outer, 0, num_red);
        out[o] = r.finish(acc, num_red);
      }
    });
    return;
  }
  // Few outputs, each long: split each output's positions across threads, merge the partials.
  const int64_t parts = std::min(threads, num_red / kGrain);
  Odometer keep(g.keep);
  keep.seek(0);
  for (int64_t o = 0; o < num_out; ++o, keep.next()) {
    const auto identity = r.init(o);
    std::vector<typename R::Acc> partial(static_cast<size_t>(parts), identity);
    parallel_for(0, parts, 1, [&](int64_t t0, int64_t t1) {
      Odometer outer(red_outer);
      for (int64_t t = t0; t < t1; ++t) {
        partial[static_cast<size_t>(t)] =
            reduce_positions(r, identity, in + keep.offset(), g.red, outer, num_red * t / parts,
                             num_red * (t + 1) / parts);
      }
    });
    auto acc = partial[0];
    for (int64_t t = 1; t < parts; ++t) r.merge(acc, partial[static_cast<size_t>(t)]);
    out[o] = r.finish(acc, num_red);
  }
}

// ---- outer loop: rows of kept outputs, accumulated lane-wise ----

// Per-output accumulators of up to kTile outputs with a cascade over rows (see Cascade).
template <typename R>
class LaneCascade {
 public:
  using Acc = typename R::Acc;
  static constexpr int64_t kTile = kTileOf<Acc>;
  explicit LaneCascade(const R& r) : r_(r), acc_(static_cast<size_t>((kLaneLevels + 1) * kTile)) {}
  void reset(int64_t first_output, int64_t width) {
    w_ = width;
    rows_ = 0;
    counts_ = {};
    for (int64_t j = 0; j < w_; ++j) identity()[j] = r_.init(first_output + j);
    for (int k = 0; k < kLaneLevels; ++k) std::copy_n(identity(), w_, level(k));
  }
  Acc* level(int k) { return acc_.data() + static_cast<size_t>(k) * kTile; }
  void row_done() {
    if (++rows_ < kRowBlock) return;
    rows_ = 0;
    for (int k = 0; k + 1 < kLaneLevels; ++k) {
      Acc* lo = level(k);
      Acc* hi = level(k + 1);
      for (int64_t j = 0; j < w_; ++j) r_.merge(hi[j], lo[j]);
      std::copy_n(identity(), w_, lo);
      if (k + 2 == kLaneLevels || ++counts_[k + 1] < kFan) return;
      counts_[k + 1] = 0;
    }
  }
  void result(Acc* dst) {
    std::copy_n(level(kLaneLevels - 1), w_, dst);
    for (int k = kLaneLevels - 1; k-- > 0;) {
      for (int64_t j = 0; j < w_; ++j) r_.merge(dst[j], level(k)[j]);
    }
  }

 private:
  Acc* identity() { return level(kLaneLevels); }
  const R& r_;
  std::vector<Acc> acc_;
  int64_t w_ = 0;
  int64_t rows_ = 0;
  std::array<int, kLaneLevels> counts_{};
};

// Accumulates the rows at reduced positions [b, e) (walked by `red` over g.red) of w outputs
// with input stride ks into lc.
template <typename R>
void accumulate_rows(const R& r, LaneCascade<R>& lc, const typename R::In* base, int64_t ks,
                     int64_t w, const Dims& red_dims, Odometer& red, int64_t b, int64_t e) {
  auto add_row = [&](const typename R::In* __restrict row, int64_t pos) {
    typename R::Acc* __restrict acc = lc.level(0);
    if (ks == 1) {
      for (int64_t j = 0; j < w; ++j) r.step(acc[j], row[j], pos);
    } else {
      for (int64_t j = 0; j < w; ++j) r.step(acc[j], row[j * ks], pos);
    }
    lc.row_done();
  };
  if (red_dims.sizes.size() == 1) {  // the common case: one pointer increment per row
    const int64_t stride = red_dims.strides[0];
    for (int64_t pos = b; pos < e; ++pos) add_row(base + pos * stride, pos);
    return;
  }
  red.seek(b);
  for (int64_t pos = b; pos < e; ++pos, red.next()) add_row(base + red.offset(), pos);
}

template <typename R>
void run_outer(const R& r, typename R::Out* out, const typename R::In* in, const Geometry& g) {
  using Acc = typename R::Acc;
  constexpr int64_t kTile = kTileOf<Acc>;
  const int64_t num_red = g.red.numel();
  const int64_t len = g.keep.sizes.back();
  const int64_t ks = g.keep.strides.back();
  const Dims keep_outer = g.keep.without_last();
  const int64_t tiles_per_row = (len + kTile - 1) / kTile;
  const int64_t tasks = keep_outer.numel() * tiles_per_row;
  const int64_t threads = get_num_threads();
  auto width = [&](int64_t tile) { return std::min(kTile, len - tile * kTile); };
  if (tasks >= 2 * threads || num_red < 2 * kGrain) {
    const int64_t grain = std::max<int64_t>(1, kGrain / (std::min(len, kTile) * num_red));
    parallel_for(0, tasks, grain, [&](int64_t t0, int64_t t1) {
      LaneCascade<R> lc(r);
      Odometer keep(keep_outer), red(g.red);
      keep.seek(t0 / tiles_per_row);
      std::array<Acc, kTile> res;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t tile = t % tiles_per_row;
        if (tile == 0 && t != t0) keep.next();
        const int64_t first = (t / tiles_per_row) * len + tile * kTile;
        const int64_t w = width(tile);
        lc.reset(first, w);
        accumulate_rows(r, lc, in + keep.offset() + tile * kTile * ks, ks, w, g.red, red, 0,
                        num_red);
        lc.result(res.data());
        for (int64_t j = 0; j < w; ++j) out[first + j] = r.finish(res[j], num_red);
      }
    });
    return;
  }
  // Few tiles of long columns: split the rows of each tile across threads, merge the partials.
  const int64_t parts = std::min(threads, num_red / kGrain);
  Odometer keep(keep_outer);
  keep.seek(0);
  std::vector<Acc> partial(static_cast<size_t>(parts * kTile));
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t tile = t % tiles_per_row;
    if (tile == 0 && t != 0) keep.next();
    const int64_t first = (t / tiles_per_row) * len + tile * kTile;
    const int64_t w = width(tile);
    const typename R::In* base = in + keep.offset() + tile * kTile * ks;
    parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
      LaneCascade<R> lc(r);
      Odometer red(g.red);
      for (int64_t p = p0; p < p1; ++p) {
        lc.reset(first, w);
        accumulate_rows(r, lc, base, ks, w, g.red, red, num_red * p / parts,
                        num_red * (p + 1) / parts);
        lc.result(partial.data() + p * kTile);
      }
    });
    for (int64_t j = 0; j < w; ++j) {
      Acc acc = partial[static_cast<size_t>(j)];
      for (int64_t p = 1; p < parts; ++p) r.merge(acc, partial[static_cast<size_t>(p * kTile + j)]);
      out[first + j] = r.finish(acc, num_red);
    }
  }
}

// ---- dispatch ----

template <typename R>
void run(const R& r, typename R::Out* out, const Tensor& in, const Geometry& g) {
  const auto* data = static_cast<const typename R::In*>(in.raw_data());
  const int64_t num_out = g.keep.numel();
  if (g.red.numel() == 0) {
    for (int64_t o = 0; o < num_out; ++o) out[o] = r.finish(r.init(o), 0);
    return;
  }
  const bool outer = !g.keep.sizes.empty() && g.keep.strides.back() != 0 &&
                     (g.red.strides.back() == 0 ||
                      std::abs(g.keep.strides.back()) < std::abs(g.red.strides.back()));
  if (outer) {
    run_outer(r, out, data, g);
  } else {
    run_inner(r, out, data, g);
  }
}

template <typename R>
void run(const R& r, const Tensor& out, const Tensor& in, const Geometry& g) {
  run(r, out.data_ptr<typename R::Out>(), in, g);
}

template <typename T>
void run_var(const Tensor& out, const Tensor& in, const Geometry& g, double correction) {
  using A = AccOf<T>;
  std::vector<A> means(static_cast<size_t>(g.keep.numel()));
  run(SumReducer<T, A, false, true>{}, means.data(), in, g);
  run(VarReducer<T>{means.data(), correction}, out, in, g);
}

template <typename T>
void run_norm(const Tensor& out, const Tensor& in, const Geometry& g, double p) {
  using A = AccOf<T>;
  const A pa = static_cast<A>(p);
  if (p == 0) return run(NormReducer<T, NormKind::kZero>{pa}, out, in, g);
  if (p == 1) return run(NormReducer<T, NormKind::kOne>{pa}, out, in, g);
  if (p == 2) return run(NormReducer<T, NormKind::kTwo>{pa}, out, in, g);
  if (std::isinf(p) && p > 0) return run(NormReducer<T, NormKind::kInf>{pa}, out, in, g);
  if (std::isinf(p)) return run(NormReducer<T, NormKind::kNegInf>{pa}, out, in, g);
  run(NormReducer<T, NormKind::kGeneral>{pa}, out, in, g);
}

void reduce_kernel(ReductionOp op, const Tensor& out, const Tensor& in,
                   const std::vector<int64_t>& dims, double param) {
  if (out.numel() == 0) return;
  const Geometry g = make_geometry(in, dims);
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Integral sums and products give int64 (see the entry points in runtime/ops/reduction.cpp).
    using SumOut = std::conditional_t<kIsFloat<T>, T, int64_t>;
    switch (op) {
      case ReductionOp::kSum:
        return run(SumReducer<T, SumOut, false, false>{}, out, in, g);
      case ReductionOp::kProd:
        return run(SumReducer<T, SumOut, true, false>{}, out, in, g);
      case ReductionOp::kAmax:
        return run(ExtremeReducer<T, true>{}, out, in, g);
      case ReductionOp::kAmin:
        return run(ExtremeReducer<T, false>{}, out, in, g);
      case ReductionOp::kArgmax:
        return run(ArgReducer<T, true>{}, out, in, g);
      case ReductionOp::kArgmin:
        return run(ArgReducer<T, false>{}, out, in, g);
      case ReductionOp::kMean:
        if constexpr (kIsFloat<T>) return run(SumReducer<T, T, false, true>{}, out, in, g);
        break;
      case ReductionOp::kVar:
        if constexpr (kIsFloat<T>) return run_var<T>(out, in, g, param);
        break;
      case ReductionOp::kNorm:
        if constexpr (kIsFloat<T>) return run_norm<T>(out, in, g, param);
        break;
    }
    TS_INTERNAL_ASSERT(false, "[", op_name(op), "] no CPU kernel for input dtype ", in.dtype());
  });
}

}  // namespace

template <>
void register_reduction_kernels<kThisCpuIsa>(KernelTable& table) {
  table.reduce = reduce_kernel;
}

}  // namespace tessera::cpu
