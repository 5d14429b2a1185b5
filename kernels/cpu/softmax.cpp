// softmax / log_softmax along one dim, numerically stable: exp(x - max) / sum, and
// (x - max) - log(sum exp(x - max)); their backward, and cross_entropy's (softmax minus the
// smoothed target), one pass per row (Note [Fused nn backward] in runtime/ops/nn_backward.cpp).
// See Note [Row kernels] in kernels/cpu/nn_rows.h.

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/nn_rows.h"

namespace tessera::cpu {

namespace {

template <typename A>
using Vec = Eigen::Array<A, Eigen::Dynamic, 1>;

// Results of exp below the normal range flushed to 0. Eigen's exp clamps its argument, so
// exp(-inf) (a masked logit) would be a tiny denormal rather than 0 and keep a probability.
// Flushing the result, not selecting on the argument, keeps the loop vectorized: Eigen 3.4's
// select() and comparisons have no packet path, so `(d < low).select(0, d.exp())` computed exp
// one element at a time (~6 ns per element). This plain loop compiles to compare + blend.
template <typename A>
void flush_subnormal(A* p, int64_t n) {
  constexpr A kMinNormal = std::numeric_limits<A>::min();
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] < kMinNormal ? A(0) : p[i];
}

// Rows in packets of Eigen's widest vector for this build (SSE2, AVX2 or AVX-512 by ISA
// variant), the last partial packet loaded under a mask (load_tail). Attention's rows are 64 long:
// there a row is four AVX-512 packets, and Eigen's array expressions (a reduction each for the max
// and the sum, an assignment each for exp, the flush and the divide) spent more on their setup and
// horizontal steps than on the math: softmax ran at half the speed of 1000-long rows.
template <typename A>
using Packet = typename Eigen::internal::packet_traits<A>::type;
template <typename A>
inline constexpr int64_t kPacketSize = Eigen::internal::unpacket_traits<Packet<A>>::size;

// The last `count` (< one packet) elements of a row in the lanes of a packet, the other lanes
// `pad`: a row's remainder then runs the packet math instead of libm one element at a time
// (std::exp at ~5 ns each; a classifier's 10 classes are all remainder: cross_entropy over
// 256 x 10 logits took 19 us forward and 19 us backward on one Xeon thread, now 10 and 10). A
// masked load where the ISA has one: filling a buffer with scalar stores and loading it as a
// vector stalls on the store-to-load forwarding (that version was 10% slower than libm).
template <typename A>
Packet<A> load_tail(const A* p, int64_t count, A pad) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<A, float>) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(pad), static_cast<__mmask16>((1u << count) - 1), p);
  } else {
    return _mm512_mask_loadu_pd(_mm512_set1_pd(pad), static_cast<__mmask8>((1u << count) - 1), p);
  }
#elif defined(__AVX2__)
  if constexpr (std::is_same_v<A, float>) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_blendv_ps(_mm256_set1_ps(pad), _mm256_maskload_ps(p, mask),
                            _mm256_castsi256_ps(mask));
  } else {
    const __m256i mask =
        _mm256_cmpgt_epi64(_mm256_set1_epi64x(count), _mm256_setr_epi64x(0, 1, 2, 3));
    return _mm256_blendv_pd(_mm256_set1_pd(pad), _mm256_maskload_pd(p, mask),
                            _mm256_castsi256_pd(mask));
  }
#else
  // SSE2: a remainder of at most three floats or one double.
  alignas(16) A lanes[kPacketSize<A>];
  std::fill(lanes, lanes + kPacketSize<A>, pad);
  std::copy(p, p + count, lanes);
  return Eigen::internal::pload<Packet<A>>(lanes);
#endif
}

// max of p[0, n), n >= 1.
template <typename A>
A row_max(const A* p, int64_t n) {
  namespace ei = Eigen::internal;
  constexpr int64_t L = kPacketSize<A>;
  int64_t i = 0;
  A m = -std::numeric_limits<A>::infinity();
  if (n >= L) {
    Packet<A> acc = ei::ploadu<Packet<A>>(p);
    for (i = L; i + L <= n; i += L) acc = ei::pmax(acc, ei::ploadu<Packet<A>>(p + i));
    m = ei::predux_max(acc);
  }
  if (i < n) {
    const Packet<A> tail = load_tail(p + i, n - i, -std::numeric_limits<A>::infinity());
    m = std::max(m, ei::predux_max(tail));
  }
  return m;
}

// y = exp(x - m), results below the normal range flushed to 0 (see flush_subnormal); returns
// their sum. y may alias x; with kStore false, y is not written (log_softmax needs the sum only).
template <bool kStore, typename A>
A exp_shifted(const A* x, [[maybe_unused]] A* y, int64_t n, A m) {
  namespace ei = Eigen::internal;
  constexpr int64_t L = kPacketSize<A>;
  const Packet<A> shift = ei::pset1<Packet<A>>(m);
  const Packet<A> min_normal = ei::pset1<Packet<A>>(std::numeric_limits<A>::min());
  const Packet<A> zero = ei::pzero(shift);
  Packet<A> acc = zero;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const Packet<A> e = ei::pexp(ei::psub(ei::ploadu<Packet<A>>(x + i), shift));
    const Packet<A> kept = ei::pselect(ei::pcmp_lt(e, min_normal), zero, e);
    if constexpr (kStore) ei::pstoreu(y + i, kept);
    acc = ei::padd(acc, kept);
  }
  A sum = ei::predux(acc);
  if (i < n) {
    // Lanes past the row hold m (exp 0 = 1), neither stored nor summed.
    alignas(64) A e[L];
    ei::pstore(e, ei::pexp(ei::psub(load_tail(x + i, n - i, m), shift)));
    for (int64_t j = 0; j < n - i; ++j) {
      const A kept = e[j] < std::numeric_limits<A>::min() ? A(0) : e[j];
      if constexpr (kStore) y[i + j] = kept;
      sum += kept;
    }
  }
  return sum;
}

// y = x * scale; y may alias x.
template <typename A>
void scale_row(const A* x, A* y, int64_t n, A scale) {
  namespace ei = Eigen::internal;
  constexpr int64_t L = kPacketSize<A>;
  const Packet<A> k = ei::pset1<Packet<A>>(scale);
  int64_t i = 0;
  for (; i + L <= n; i += L) ei::pstoreu(y + i, ei::pmul(ei::ploadu<Packet<A>>(x + i), k));
  for (; i < n; ++i) y[i] = x[i] * scale;
}

// y = (x - m) - lse: log_softmax from the row's max and log(sum exp(x - m)); y may alias x.
template <typename A>
void log_softmax_row(const A* x, A* y, int64_t n, A m, A lse) {
  namespace ei = Eigen::internal;
  constexpr int64_t L = kPacketSize<A>;
  const Packet<A> pm = ei::pset1<Packet<A>>(m);
  const Packet<A> pl = ei::pset1<Packet<A>>(lse);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    ei::pstoreu(y + i, ei::psub(ei::psub(ei::ploadu<Packet<A>>(x + i), pm), pl));
  }
  for (; i < n; ++i) y[i] = (x[i] - m) - lse;
}

// y = softmax(x) over n contiguous elements; y may alias x.
template <typename A>
void softmax_contiguous(const A* x, A* y, int64_t n, bool log) {
  const A m = row_max(x, n);
  if (log) {
    log_softmax_row(x, y, n, m, std::log(exp_shifted<false>(x, y, n, m)));
  } else {
    scale_row(y, y, n, A(1) / exp_shifted<true>(x, y, n, m));
  }
}

// One row per element of the leading view; each row is one (possibly strided) run along dim.
template <typename T>
void softmax_rows(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  using A = acc_t<T>;
  const int64_t n = in.size(dim);
  const RowLayout ri = row_layout(in.transpose(dim, -1), 1);
  const RowLayout ro = row_layout(out.transpose(dim, -1), 1);
  const Tensor in_rows = in.select(dim, 0);
  const Tensor out_rows = out.select(dim, 0);
  const auto es = static_cast<int64_t>(sizeof(T));
  for_each_row<2>({&out_rows, &in_rows}, n, [&](std::array<char*, 2> p) {
    if constexpr (std::is_same_v<T, A>) {
      if (ri.contiguous(es) && ro.contiguous(es)) {
        softmax_contiguous(reinterpret_cast<const A*>(p[1]), reinterpret_cast<A*>(p[0]), n, log);
        return;
      }
    }
    A* buf = scratch_row<A>(n);
    load_row<T>(ri, p[1], buf);
    softmax_contiguous(buf, buf, n, log);
    store_row<T>(ro, p[0], buf);
  });
}

// Lanes of kLanes neighbouring rows processed together, so that a dim with a large stride (e.g.
// dim 0 of a contiguous matrix) is read one contiguous block of lanes at a time and the math
// vectorizes across lanes.
constexpr int64_t kLanes = 64;

template <typename T, typename A>
void load_lanes(const char* p, int64_t stride, int64_t n, A* dst) {
  if (stride == static_cast<int64_t>(sizeof(T))) {
    const T* s = reinterpret_cast<const T*>(p);
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<A>(*reinterpret_cast<const T*>(p + i * stride));
  }
}

template <typename T, typename A>
void store_lanes(char* p, int64_t stride, int64_t n, const A* src) {
  if (stride == static_cast<int64_t>(sizeof(T))) {
    T* d = reinterpret_cast<T*>(p);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p + i * stride) = static_cast<T>(src[i]);
  }
}

template <typename T>
void softmax_lanes(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  using A = acc_t<T>;
  using Lanes = Eigen::Array<A, Eigen::Dynamic, 1, 0, kLanes, 1>;
  const int64_t n = in.size(dim);
  const int64_t sdi = in.stride(dim) * static_cast<int64_t>(sizeof(T));
  const int64_t sdo = out.stride(dim) * static_cast<int64_t>(sizeof(T));
  const Tensor in_rows = in.select(dim, 0);
  const Tensor out_rows = out.select(dim, 0);
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / n);
  for_each_strided<2>(
      {&out_rows, &in_rows},
      [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t rows) {
        Lanes x, m, sum;
        for (int64_t b = 0; b < rows; b += kLanes) {
          const int64_t nb = std::min(kLanes, rows - b);
          const char* ib = p[1] + b * s[1];
          char* ob = p[0] + b * s[0];
          x.resize(nb);
          m.setConstant(nb, -std::numeric_limits<A>::infinity());
          sum.setZero(nb);
          for (int64_t j = 0; j < n; ++j) {
            load_lanes<T>(ib + j * sdi, s[1], nb, x.data());
            m = m.max(x);
          }
          // Softmax of an out of the accumulation type keeps exp(x - m) there for the last pass.
          const bool keep_exp = std::is_same_v<T, A> && !log;
          for (int64_t j = 0; j < n; ++j) {
            load_lanes<T>(ib + j * sdi, s[1], nb, x.data());
            x = (x - m).exp();
            flush_subnormal(x.data(), nb);
            sum += x;
            if (keep_exp) store_lanes<T>(ob + j * sdo, s[0], nb, x.data());
          }
          if (log) {
            sum = sum.log();
          } else {
            sum = sum.inverse();
          }
          for (int64_t j = 0; j < n; ++j) {
            if (keep_exp) {
              load_lanes<T>(ob + j * sdo, s[0], nb, x.data());
              x *= sum;
            } else {
              load_lanes<T>(ib + j * sdi, s[1], nb, x.data());
              if (log) {
                x = (x - m) - sum;
              } else {
                x = (x - m).exp();
                flush_subnormal(x.data(), nb);
                x *= sum;
              }
            }
            store_lanes<T>(ob + j * sdo, s[0], nb, x.data());
          }
        }
      },
      grain);
}

// The gradient of softmax (log: log_softmax) over one row of n elements: g and y are read, out
// written; out may alias g (not y). In packets, as the forward (see kPacketSize).
template <typename A>
void softmax_backward_row(A* out, const A* g, const A* y, int64_t n, bool log) {
  namespace ei = Eigen::internal;
  constexpr int64_t L = kPacketSize<A>;
  if (log) {
    // out = g - softmax * sum(g), softmax = exp(log_softmax); masked entries (-inf) must give
    // exactly 0, as in the forward.
    const A s = Eigen::Map<const Vec<A>>(g, n).sum();
    A* e = scratch_row<A>(n, 2);
    exp_shifted<true>(y, e, n, A(0));
    Eigen::Map<Vec<A>>(out, n) =
        Eigen::Map<const Vec<A>>(g, n) - Eigen::Map<const Vec<A>>(e, n) * s;
    return;
  }
  // out = y * (g - sum(g * y))
  Packet<A> acc = ei::pset1<Packet<A>>(A(0));
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    acc = ei::pmadd(ei::ploadu<Packet<A>>(g + i), ei::ploadu<Packet<A>>(y + i), acc);
  }
  A s = ei::predux(acc);
  for (; i < n; ++i) s += g[i] * y[i];
  const Packet<A> ps = ei::pset1<Packet<A>>(s);
  for (i = 0; i + L <= n; i += L) {
    ei::pstoreu(out + i,
                ei::pmul(ei::ploadu<Packet<A>>(y + i), ei::psub(ei::ploadu<Packet<A>>(g + i), ps)));
  }
  for (; i < n; ++i) out[i] = y[i] * (g[i] - s);
}

template <typename T>
void softmax_backward_rows(const Tensor& out, const Tensor& grad, const Tensor& y, int64_t dim,
                           bool log) {
  using A = acc_t<T>;
  const int64_t n = y.size(dim);
  const RowLayout ro = row_layout(out.transpose(dim, -1), 1);
  const RowLayout rg = row_layout(grad.transpose(dim, -1), 1);
  const RowLayout ry = row_layout(y.transpose(dim, -1), 1);
  const Tensor out_rows = out.select(dim, 0);
  const Tensor grad_rows = grad.select(dim, 0);
  const Tensor y_rows = y.select(dim, 0);
  const auto es = static_cast<int64_t>(sizeof(T));
  const bool direct =
      std::is_same_v<T, A> && ro.contiguous(es) && rg.contiguous(es) && ry.contiguous(es);
  for_each_row<3>({&out_rows, &grad_rows, &y_rows}, n, [&](std::array<char*, 3> p) {
    if (direct) {
      softmax_backward_row(reinterpret_cast<A*>(p[0]), reinterpret_cast<const A*>(p[1]),
                           reinterpret_cast<const A*>(p[2]), n, log);
      return;
    }
    A* g = scratch_row<A>(n, 0);
    A* yv = scratch_row<A>(n, 1);
    load_row<T>(rg, p[1], g);
    load_row<T>(ry, p[2], yv);
    softmax_backward_row(g, g, yv, n, log);
    store_row<T>(ro, p[0], g);
  });
}

// The backward's rows made row-major where they are strided, as softmax_staged. out may be grad:
// then both are strided or neither is, and a strided grad is copied before out is written.
void softmax_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& y, int64_t dim,
                             bool log) {
  if (out.numel() == 0) return;
  visit_floating(out.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t last = y.dim() - 1;
    const Tensor out_rows = out.transpose(dim, last);
    const Tensor grad_rows = grad.transpose(dim, last);
    const Tensor y_rows = y.transpose(dim, last);
    const Tensor g = rows_in_order(grad_rows, 1);
    const Tensor yv = rows_in_order(y_rows, 1);
    if (!rows_worth_staging(out_rows, 1)) {
      return softmax_backward_rows<T>(out_rows, g, yv, last, log);
    }
    const Tensor dx = Tensor::make_empty(out_rows.sizes(), out.dtype(), out.device());
    softmax_backward_rows<T>(dx, g, yv, last, log);
    kernels(DeviceType::CPU, "copy").copy(out_rows, dx);
  });
}

// cross_entropy's gradient, row i of [N, C]: (softmax(x_i) - q_i) * coef_i (KernelTable).
template <typename T>
void cross_entropy_backward_rows(const Tensor& out, const Tensor& logits, const Tensor& target,
                                 const Tensor& grad, double scale, int64_t ignore_index,
                                 double label_smoothing) {
  using A = acc_t<T>;
  const int64_t rows = logits.size(0);
  const int64_t c = logits.size(1);
  const T* x = logits.data_ptr<T>();
  T* o = out.data_ptr<T>();
  const int64_t* t = target.data_ptr<int64_t>();
  const T* g = grad.data_ptr<T>();
  const bool per_row = grad.dim() > 0;
  const A smooth = static_cast<A>(label_smoothing / static_cast<double>(c));
  const A hit = static_cast<A>(1.0 - label_smoothing);
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(c, 1));
  parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    A* p = scratch_row<A>(c, 0);
    for (int64_t i = begin; i < end; ++i) {
      T* orow = o + i * c;
      if (t[i] == ignore_index) {
        std::fill(orow, orow + c, T(0));
        continue;
      }
      const T* xrow = x + i * c;
      if constexpr (std::is_same_v<T, A>) {
        // Straight from the logits: a row just copied with scalar stores and read back as
        // packets stalls each load on the store forwarding.
        softmax_contiguous(xrow, p, c, /*log=*/false);
      } else {
        for (int64_t j = 0; j < c; ++j) p[j] = static_cast<A>(xrow[j]);
        softmax_contiguous(p, p, c, /*log=*/false);
      }
      const A coef = static_cast<A>(static_cast<double>(g[per_row ? i : 0]) * scale);
      Eigen::Map<Vec<A>> ps(p, c);
      ps = (ps - smooth) * coef;
      p[t[i]] -= hit * coef;
      for (int64_t j = 0; j < c; ++j) orow[j] = static_cast<T>(p[j]);
    }
  });
}

void cross_entropy_backward_kernel(const Tensor& out, const Tensor& logits, const Tensor& target,
                                   const Tensor& grad, double scale, int64_t ignore_index,
                                   double label_smoothing) {
  if (out.numel() == 0) return;
  visit_floating(out.dtype(), "cross_entropy_backward", [&](auto tag) {
    cross_entropy_backward_rows<decltype(tag)>(out, logits, target, grad, scale, ignore_index,
                                               label_smoothing);
  });
}

// Lanes pay off when dim is strided and some other dim is contiguous to vectorize across.
bool prefer_lanes(const Tensor& in, int64_t dim) {
  if (in.stride(dim) == 1 || in.size(dim) == 1) return false;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d != dim && in.size(d) > 1 && in.stride(d) == 1) return true;
  }
  return false;
}

// Whether the lanes kernel reads and writes in place: in's dim is strided and a dim that is
// contiguous in in is contiguous in out too (softmax over dim 0 of a row-major matrix). Where
// out's lanes are strided instead (a transposed input's softmax into a row-major out), it
// scattered every store: softmax(b.t(), 1) of 1024^2 took 6.9 ms.
bool lanes_in_place(const Tensor& out, const Tensor& in, int64_t dim) {
  if (!prefer_lanes(in, dim)) return false;
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (d != dim && in.size(d) > 1 && in.stride(d) == 1 && out.stride(d) == 1) return true;
  }
  return false;
}

// softmax along `dim` of rows made row-major where they are strided (Note [Rows read across the
// grain] in kernels/cpu/nn_rows.h): in copied with dim innermost, out computed in a row-major
// buffer and copied into place.
template <typename T>
void softmax_staged(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  const int64_t last = in.dim() - 1;
  const Tensor in_rows = in.transpose(dim, last);
  const Tensor out_rows = out.transpose(dim, last);
  const Tensor x = rows_in_order(in_rows, 1);
  if (!rows_worth_staging(out_rows, 1)) return softmax_rows<T>(out_rows, x, last, log);
  const Tensor y = Tensor::make_empty(out_rows.sizes(), out.dtype(), out.device());
  softmax_rows<T>(y, x, last, log);
  kernels(DeviceType::CPU, "copy").copy(out_rows, y);
}

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  visit_floating(in.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    if (in.numel() < kStageRowsMinElements) {
      if (prefer_lanes(in, dim)) return softmax_lanes<T>(out, in, dim, log);
      return softmax_rows<T>(out, in, dim, log);
    }
    if (lanes_in_place(out, in, dim)) return softmax_lanes<T>(out, in, dim, log);
    softmax_staged<T>(out, in, dim, log);
  });
}

}  // namespace

template <>
void register_softmax_kernels<kThisCpuIsa>(KernelTable& table) {
  table.softmax = softmax_kernel;
  table.softmax_backward = softmax_backward_kernel;
  table.cross_entropy_backward = cross_entropy_backward_kernel;
}

}  // namespace tessera::cpu
