// CPU kernels of the elementwise family: unary, binary, where, clamp. The scalar math lives in
// kernels/cpu/elementwise_functors.h; this file only walks memory.
//
// Note [Elementwise inner loops]
// Every operand is contiguous, a broadcast scalar (all strides 0), or strided. When all operands
// are contiguous or scalars the kernel walks one flat range (no geometry, no allocation: the
// 1-element op must stay cheap); otherwise for_each_strided hands out runs (Note [Strided loops]).
// Within a run, float/double/integer data with contiguous or stride-0 operands is processed in
// place by loops GCC vectorizes, and transcendental unary ops go through Eigen's packet math.
// Everything else (Half/BFloat16, strided runs) is converted in blocks of kOpMathBlock elements
// into op-math buffers, computed there by the same contiguous code, and written back.
//
// Note [Inputs read across the grain]
// An input whose last dim is strided while the output's runs with unit stride (a transposed or
// permuted view: x + y.t(), or the gradient of a split attention head added into its part of the
// fused qkv gradient) would be read one element per cache line by those runs: `a + b.t()` on
// 1024^2 floats took 8.0 ms against 0.43 ms for `a + b`, a head's 128K-element gradient added
// into its slice 216 us against 14. Such an input is first copied into the output's order by the
// copy kernel, which transposes in cache-sized tiles (1.07 ms and 51 us with the copy), then read
// contiguously (staged_input in kernels/cpu/elementwise_loops.h): by the unary, binary, where and
// clamp kernels here and the pointwise gradient kernel (elementwise_backward.cpp).

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <unsupported/Eigen/SpecialFunctions>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/elementwise_functors.h"
#include "tessera/kernels/cpu/elementwise_loops.h"
#include "tessera/kernels/cpu/gelu_avx512.h"
#include "tessera/kernels/cpu/stream_copy.h"

namespace tessera::cpu {

namespace {

// Writes n elements of O to contiguous dst, computing each block with fill(buf, first, count).
template <typename O, typename Fill>
void stream_out(char* dst, int64_t n, const Fill& fill) {
  constexpr int64_t kStreamBlock = 2048;
  constexpr auto kSize = static_cast<int64_t>(sizeof(O));
  O buf[kStreamBlock];
  for (int64_t i = 0; i < n; i += kStreamBlock) {
    const int64_t m = std::min(kStreamBlock, n - i);
    fill(buf, i, m);
    stream_copy(dst + i * kSize, reinterpret_cast<const char*>(buf), m * kSize);
  }
  stream_fence();
}

// Whether to write out with non-temporal stores (Note [Streaming stores]): a large output, unless
// it shares memory with an input (an in-place op): its lines are then read into the cache anyway,
// and streaming over them evicts them for nothing (`a += b` on 64 MiB ran 1.5x slower).
bool streams_output(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  if (static_cast<int64_t>(out.nbytes()) < kStreamBytes) return false;
  return std::none_of(inputs.begin(), inputs.end(),
                      [&](const Tensor* in) { return out.is_alias_of(*in); });
}

// ---- unary ----

template <typename C>
using ArrayMap = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
template <typename C>
using ConstArrayMap = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;

// Eigen clamps exp's argument, so exp(-inf) would come out as a tiny denormal instead of 0:
// chunks holding arguments below this bound (or a NaN, which hides the minimum) take the scalar
// functor.
template <typename C>
constexpr C kEigenExpLow = std::is_same_v<C, float> ? C(-87) : C(-707);

// out[0, n) = op(in[0, n)) on contiguous op-math data; out may equal in.
template <UnaryOp op, typename C>
void unary_run(C* out, const C* in, int64_t n) {
  const UnaryFn<op> fn;
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    ArrayMap<C> o(out, n);
    ConstArrayMap<C> x(in, n);
    if constexpr (op == UnaryOp::kExp) {
      constexpr int64_t kChunk = 1024;
      for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t m = std::min(kChunk, n - i);
        if (!(x.segment(i, m).template minCoeff<Eigen::PropagateNaN>() >= kEigenExpLow<C>)) {
          for (int64_t j = i; j < i + m; ++j) out[j] = fn(in[j]);
        } else {
          o.segment(i, m) = x.segment(i, m).exp();
        }
      }
      return;
    } else if constexpr (op == UnaryOp::kLog) {
      o = x.log();
      return;
    } else if constexpr (op == UnaryOp::kSqrt) {
      // Not Eigen's sqrt(): under EIGEN_FAST_MATH (which its vectorized tanh and erf need) it is
      // an rsqrt estimate refined by Newton steps, a bit or two off and NaN at +inf (float on
      // SSE and AVX, float and double on AVX-512). This loop vectorizes to the exact
      // instruction: the file is built with -fno-math-errno (kernels/CMakeLists.txt).
      for (int64_t i = 0; i < n; ++i) out[i] = std::sqrt(in[i]);
      return;
    } else if constexpr (op == UnaryOp::kRsqrt) {
      o = x.rsqrt();
      return;
    } else if constexpr (op == UnaryOp::kTanh) {
      o = x.tanh();
      return;
    } else if constexpr (op == UnaryOp::kSigmoid) {
      // Not Eigen's logistic(): below -9 it returns exp(x), 1e-4 off relative to 1/(1+exp(-x)).
      o = (C(1) + (-x).exp()).inverse();
      return;
    } else if constexpr (op == UnaryOp::kSilu) {
      o = x / (C(1) + (-x).exp());
      return;
    } else if constexpr (op == UnaryOp::kGelu) {
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<C, float>) {  // Note [GELU from tables]
        gelu_avx512(out, in, n);
        return;
      }
#endif
      o = C(0.5) * x * (C(1) + (x * C(0.70710678118654752440)).erf());
      return;
    } else if constexpr (op == UnaryOp::kErf) {
      o = x.erf();
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i] = fn(in[i]);
}

// Applies run(C* out, const C* in, n) over out = f(in), both of storage type T.
template <typename T, typename Run>
void unary_apply(const Tensor& out, const Tensor& in, const Run& run) {
  using C = opmath_t<T>;
  const bool stream = streams_output(out, {&in});
  for_each_element<2>(
      {&out, &in}, [&](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
        constexpr auto kSize = static_cast<int64_t>(sizeof(T));
        if constexpr (std::is_same_v<T, C>) {
          if (s[0] == kSize && s[1] == kSize) {
            const T* x = reinterpret_cast<const T*>(p[1]);
            if (stream) {
              stream_out<T>(p[0], n, [&](T* buf, int64_t i, int64_t m) { run(buf, x + i, m); });
            } else {
              run(reinterpret_cast<T*>(p[0]), x, n);
            }
            return;
          }
        }
        C buf[kOpMathBlock];
        for (int64_t i = 0; i < n; i += kOpMathBlock) {
          const int64_t m = std::min(kOpMathBlock, n - i);
          gather<T>(buf, p[1] + i * s[1], s[1], m);
          run(buf, buf, m);
          scatter<T>(p[0] + i * s[0], s[0], buf, m);
        }
      });
}

template <UnaryOp op, typename T>
void unary_typed(const Tensor& out, const Tensor& in) {
  using C = opmath_t<T>;
  if constexpr (UnaryFn<op>::template supports<C>) {
    unary_apply<T>(out, in, [](C* o, const C* x, int64_t n) { unary_run<op>(o, x, n); });
  } else {
    TS_CHECK_DTYPE(false, "[", op_name(op), "] has no CPU kernel for dtype ", dtype_of<T>);
  }
}

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in_) {
  Tensor in_copy;
  const Tensor& in = staged_input(out, in_, in_copy);
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
#define TS_CASE(e, name, f)              \
  case UnaryOp::e:                       \
    unary_typed<UnaryOp::e, T>(out, in); \
    break;
      TS_FOR_EACH_UNARY_OP(TS_CASE)
#undef TS_CASE
    }
  });
}

// ---- binary ----

// o[i] = fn(x[i], y[i]) where a stride of 0 marks a broadcast scalar. Separate loops per case so
// that each one vectorizes.
template <typename O, typename C, typename Fn>
void binary_run(O* o, const C* x, int64_t sx, const C* y, int64_t sy, int64_t n, const Fn& fn) {
  if (sx != 0 && sy != 0) {
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(fn(x[i], y[i]));
  } else if (sy == 0 && sx != 0) {
    const C yv = *y;
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(fn(x[i], yv));
  } else if (sx == 0 && sy != 0) {
    const C xv = *x;
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(fn(xv, y[i]));
  } else {
    const O v = static_cast<O>(fn(*x, *y));
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// out (storage type O: T, or bool for comparisons) = fn(a, b), a and b of storage type T.
template <typename T, typename O, typename Fn>
void binary_apply(const Tensor& out, const Tensor& a, const Tensor& b, const Fn& fn) {
  using C = opmath_t<T>;
  using R = std::conditional_t<std::is_same_v<O, bool>, bool, C>;
  const bool stream = streams_output(out, {&a, &b});
  for_each_element<3>(
      {&out, &a, &b}, [&](std::array<char*, 3> p, std::array<int64_t, 3> s, int64_t n) {
        constexpr auto kSize = static_cast<int64_t>(sizeof(T));
        if constexpr (std::is_same_v<T, C>) {
          const bool x_ok = s[1] == kSize || s[1] == 0;
          const bool y_ok = s[2] == kSize || s[2] == 0;
          if (s[0] == static_cast<int64_t>(sizeof(O)) && x_ok && y_ok) {
            const T* x = reinterpret_cast<const T*>(p[1]);
            const T* y = reinterpret_cast<const T*>(p[2]);
            if (stream) {
              stream_out<O>(p[0], n, [&](O* buf, int64_t i, int64_t m) {
                binary_run(buf, s[1] == 0 ? x : x + i, s[1], s[2] == 0 ? y : y + i, s[2], m, fn);
              });
            } else {
              binary_run(reinterpret_cast<O*>(p[0]), x, s[1], y, s[2], n, fn);
            }
            return;
          }
        }
        // Block path: a scalar operand is converted once, not once per block.
        C xbuf[kOpMathBlock], ybuf[kOpMathBlock];
        R rbuf[kOpMathBlock];
        if (s[1] == 0) gather<T>(xbuf, p[1], 0, 1);
        if (s[2] == 0) gather<T>(ybuf, p[2], 0, 1);
        for (int64_t i = 0; i < n; i += kOpMathBlock) {
          const int64_t m = std::min(kOpMathBlock, n - i);
          if (s[1] != 0) gather<T>(xbuf, p[1] + i * s[1], s[1], m);
          if (s[2] != 0) gather<T>(ybuf, p[2] + i * s[2], s[2], m);
          binary_run(rbuf, xbuf, s[1] == 0 ? 0 : 1, ybuf, s[2] == 0 ? 0 : 1, m, fn);
          scatter<O>(p[0] + i * s[0], s[0], rbuf, m);
        }
      });
}

// Integer division cannot produce a value for a zero divisor: raise instead of trapping.
template <typename C>
struct CheckedIntDiv {
  C operator()(C a, C b) const {
    TS_CHECK(b != C(0), "[div] integer division by zero");
    return BinaryFn<BinaryOp::kDiv>{}(a, b);
  }
};

template <BinaryOp op, typename T>
void binary_typed(const Tensor& out, const Tensor& a, const Tensor& b) {
  using C = opmath_t<T>;
  using Fn = BinaryFn<op>;
  using O = std::conditional_t<Fn::kCompare, bool, T>;
  if constexpr (!Fn::template supports<C>) {
    TS_CHECK_DTYPE(false, "[", op_name(op), "] has no CPU kernel for dtype ", dtype_of<T>);
  } else if constexpr (op == BinaryOp::kDiv && kIsInt<C>) {
    binary_apply<T, O>(out, a, b, CheckedIntDiv<C>{});
  } else {
    binary_apply<T, O>(out, a, b, Fn{});
  }
}

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a_, const Tensor& b_) {
  Tensor a_copy, b_copy;
  const Tensor& a = staged_input(out, a_, a_copy);
  const Tensor& b = staged_input(out, b_, b_copy);
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
#define TS_CASE(e, name, kind)               \
  case BinaryOp::e:                          \
    binary_typed<BinaryOp::e, T>(out, a, b); \
    break;
      TS_FOR_EACH_BINARY_OP(TS_CASE)
#undef TS_CASE
    }
  });
}

// ---- where, clamp ----

// c ? x : y on the values' bits, without a branch: `c[i] ? x[i] : y[i]` compiled to one, which
// random conditions mispredict (1M floats: 3.9 ms, against 0.3 ms for a copy); masks vectorize.
template <typename T>
T select_bits(bool c, T x, T y) {
  using U = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  const auto mask = static_cast<U>(-static_cast<int64_t>(c));
  return std::bit_cast<T>(
      static_cast<U>((std::bit_cast<U>(x) & mask) | (std::bit_cast<U>(y) & static_cast<U>(~mask))));
}

// Selection copies storage values: no op-math conversion needed.
void where_kernel(const Tensor& out, const Tensor& cond_, const Tensor& a_, const Tensor& b_) {
  Tensor cond_copy, a_copy, b_copy;
  const Tensor& cond = staged_input(out, cond_, cond_copy);
  const Tensor& a = staged_input(out, a_, a_copy);
  const Tensor& b = staged_input(out, b_, b_copy);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for_each_element<4>({&out, &cond, &a, &b},
                        [](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
                          constexpr auto kSize = static_cast<int64_t>(sizeof(T));
                          if (s[0] == kSize && s[1] == 1 && s[2] == kSize && s[3] == kSize) {
                            T* o = reinterpret_cast<T*>(p[0]);
                            const bool* c = reinterpret_cast<const bool*>(p[1]);
                            const T* x = reinterpret_cast<const T*>(p[2]);
                            const T* y = reinterpret_cast<const T*>(p[3]);
                            for (int64_t i = 0; i < n; ++i) o[i] = select_bits(c[i], x[i], y[i]);
                            return;
                          }
                          for (int64_t i = 0; i < n; ++i) {
                            const bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
                            *reinterpret_cast<T*>(p[0] + i * s[0]) =
                                *reinterpret_cast<const T*>(c ? p[2] + i * s[2] : p[3] + i * s[3]);
                          }
                        });
  });
}

void clamp_kernel(const Tensor& out, const Tensor& in_, const Scalar& lo, bool has_lo,
                  const Scalar& hi, bool has_hi) {
  Tensor in_copy;
  const Tensor& in = staged_input(out, in_, in_copy);
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = opmath_t<T>;
    if constexpr (kIsNumber<C>) {
      // Bounds are rounded to the storage type first, as the result is.
      const ClampFn<C> fn{static_cast<C>(lo.to<T>()), static_cast<C>(hi.to<T>()), has_lo, has_hi};
      unary_apply<T>(out, in, [&fn](C* o, const C* x, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i]);
      });
    } else {
      TS_CHECK_DTYPE(false, "[clamp] has no CPU kernel for dtype ", dtype_of<T>);
    }
  });
}

}  // namespace

template <>
void register_elementwise_kernels<kThisCpuIsa>(KernelTable& table) {
  table.unary = unary_kernel;
  table.binary = binary_kernel;
  table.where = where_kernel;
  table.clamp = clamp_kernel;
}

}  // namespace tessera::cpu
