// Philox random fills (uniform, normal, randint, dropout) and arange.
//
// Note [Philox counter layout]
// A fill draws from the 128-bit counters offset, offset + 1, ... of the key `seed` (see
// philox_block in runtime/generator.h); the op entry point reserves the counters it uses from the
// Generator first, so the next fill starts where this one ended. Which counter feeds element i
// (row-major index into the output) depends on i alone, never on how threads or ranks split the
// work:
//   32-bit draws (uniform and normal of float32/float16/bfloat16, dropout masks of every dtype):
//     ceil(n / 4) counters; element i takes counter i / 4, lane x = lanes[i % 4].
//     uniform: u = (x >> 8) * 2^-24 in [0, 1).
//     normal:  Box-Muller on the lane pairs (0, 1) and (2, 3) of counter c: with
//              u1 = ((x_even >> 8) + 1) * 2^-24 in (0, 1], u2 = (x_odd >> 8) * 2^-24, elements
//              4c + 2k and 4c + 2k + 1 (pair k) get r cos(2 pi u2) and r sin(2 pi u2),
//              r = sqrt(-2 ln u1).
//     dropout: element i is kept when uniform u_i < 1 - p.
//   64-bit draws (uniform and normal of float64, randint of every dtype):
//     ceil(n / 2) counters; element i takes counter i / 2 and the word
//     w = lanes[2 (i % 2)] << 32 | lanes[2 (i % 2) + 1].
//     uniform: u = (w >> 11) * 2^-53 in [0, 1).
//     normal:  Box-Muller on the two words (w0, w1) of counter c, u1 = ((w0 >> 11) + 1) * 2^-53,
//              u2 = (w1 >> 11) * 2^-53: element 2c gets r cos(2 pi u2), element 2c + 1 r sin.
//     randint: low + w mod (high - low) (bias below 2^-32 for ranges under 2^32).
// A uniform value that rounds up to `high` in the output dtype is replaced by `low`, so results
// stay in [low, high) as PyTorch's.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/loops.h"
#include "tessera/runtime/generator.h"

namespace tessera::cpu {

namespace {

// Counters per parallel chunk: each yields up to 4 values, so this matches the elementwise grain.
constexpr int64_t kCounterGrain = kElementwiseGrain / 4;

template <typename T>
constexpr bool kWideDraws = std::is_same_v<T, double>;

// float for the reduced floating types, as their arithmetic everywhere in Tessera.
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Calls body(lanes, first, count) for each counter c in [0, ceil(n / Per)), in parallel: `first`
// is the index of the first element counter c feeds and `count` how many it feeds (Per, or fewer
// for the last counter). Full counters pass the constant Per so that inner loops unroll.
template <int64_t Per, typename Body>
void for_each_counter(PhiloxState st, int64_t n, const Body& body) {
  const int64_t full = n / Per;
  const int64_t counters = (n + Per - 1) / Per;
  parallel_for(0, counters, kCounterGrain, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < std::min(e, full); ++c) {
      body(philox_block(st.seed, st.offset, static_cast<uint64_t>(c)), c * Per, Per);
    }
    if (e > full) {
      body(philox_block(st.seed, st.offset, static_cast<uint64_t>(full)), full * Per, n % Per);
    }
  });
}

// visit_dtype restricted to the floating dtypes (the entry points validated that).
template <typename F>
void visit_floating(const Tensor& t, const char* op, const F& f) {
  TS_INTERNAL_ASSERT(is_floating_point(t.dtype()), "[", op, "] kernel called on ", t.dtype());
  visit_dtype(t.dtype(), [&](auto tag) {
    using U = decltype(tag);
    if constexpr (std::is_floating_point_v<U> || std::is_same_v<U, Half> ||
                  std::is_same_v<U, BFloat16>) {
      f(U{});
    }
  });
}

void uniform_kernel(const Tensor& out, PhiloxState st, double low, double high) {
  visit_floating(out, "uniform", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    T* o = out.data_ptr<T>();
    const C lo = static_cast<C>(low), range = static_cast<C>(high - low);
    // See Note [Philox counter layout]: values that round to `high` wrap to `low`.
    auto finish = [lo, range, high](C u) {
      const T v = static_cast<T>(lo + range * u);
      return static_cast<double>(static_cast<C>(v)) >= high ? static_cast<T>(lo) : v;
    };
    if constexpr (kWideDraws<T>) {
      for_each_counter<2>(st, out.numel(), [&](const auto& x, int64_t first, int64_t k) {
        for (int64_t j = 0; j < k; ++j) {
          o[first + j] = finish(philox_uniform_double(x[2 * j], x[2 * j + 1]));
        }
      });
    } else {
      for_each_counter<4>(st, out.numel(), [&](const auto& x, int64_t first, int64_t k) {
        for (int64_t j = 0; j < k; ++j) o[first + j] = finish(philox_uniform_float(x[j]));
      });
    }
  });
}

void normal_kernel(const Tensor& out, PhiloxState st, double mean, double stddev) {
  visit_floating(out, "normal", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    T* o = out.data_ptr<T>();
    const C mu = static_cast<C>(mean), sigma = static_cast<C>(stddev);
    constexpr C kTwoPi = 2 * std::numbers::pi_v<C>;
    // Box-Muller: u1 in (0, 1] keeps the log finite. Writes the pair's first `k` values at `dst`.
    auto box_muller = [mu, sigma](C u1, C u2, T* dst, int64_t k) {
      const C r = std::sqrt(C(-2) * std::log(u1));
      const C theta = kTwoPi * u2;
      dst[0] = static_cast<T>(mu + sigma * r * std::cos(theta));
      if (k > 1) dst[1] = static_cast<T>(mu + sigma * r * std::sin(theta));
    };
    if constexpr (kWideDraws<T>) {
      for_each_counter<2>(st, out.numel(), [&](const auto& x, int64_t first, int64_t k) {
        const C u1 = philox_uniform_double(x[0], x[1]) + 0x1p-53;
        box_muller(u1, philox_uniform_double(x[2], x[3]), o + first, k);
      });
    } else {
      for_each_counter<4>(st, out.numel(), [&](const auto& x, int64_t first, int64_t k) {
        for (int64_t pair = 0; 2 * pair < k; ++pair) {
          const C u1 = philox_uniform_float(x[2 * pair]) + 0x1p-24f;
          box_muller(u1, philox_uniform_float(x[2 * pair + 1]), o + first + 2 * pair, k - 2 * pair);
        }
      });
    }
  });
}

template <typename T>
T from_int64(int64_t v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

void randint_kernel(const Tensor& out, PhiloxState st, int64_t low, int64_t high) {
  TS_INTERNAL_ASSERT(low < high, "[randint] kernel called with low ", low, " >= high ", high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_ptr<T>();
    for_each_counter<2>(st, out.numel(), [&](const auto& x, int64_t first, int64_t k) {
      for (int64_t j = 0; j < k; ++j) {
        const uint64_t w = (static_cast<uint64_t>(x[2 * j]) << 32) | x[2 * j + 1];
        // Unsigned wrap-around gives the right value even when high - low exceeds INT64_MAX.
        o[first + j] = from_int64<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + w % range));
      }
    });
  });
}

void dropout_kernel(const Tensor& out, const Tensor& in, PhiloxState st, double p) {
  visit_floating(out, "dropout", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    T* o = out.data_ptr<T>();
    auto src = [](const char* base, int64_t stride, int64_t j) {
      return static_cast<C>(*reinterpret_cast<const T*>(base + j * stride));
    };
    if (p >= 1.0) {  // in * 0 without draws; as PyTorch, NaN and inf inputs give NaN
      for_each_strided<2>(
          {&out, &in}, [&](std::array<char*, 2> ptr, std::array<int64_t, 2> stride, int64_t len) {
            T* dst = reinterpret_cast<T*>(ptr[0]);
            for (int64_t j = 0; j < len; ++j)
              dst[j] = static_cast<T>(src(ptr[1], stride[1], j) * C(0));
          });
      return;
    }
    // u < 1 - p for u = (x >> 8) * 2^-24 is (x >> 8) < ceil((1 - p) * 2^24), exactly.
    const auto threshold = static_cast<uint32_t>(std::ceil((1.0 - p) * 0x1p24));
    const C scale = static_cast<C>(1.0 / (1.0 - p));
    auto masked = [threshold, scale](uint32_t x, C a) {
      return static_cast<T>(a * ((x >> 8) < threshold ? scale : C(0)));
    };
    if (in.is_contiguous()) {
      const T* a = in.data_ptr<T>();
      for_each_counter<4>(st, out.numel(), [&](const auto& x, int64_t first, int64_t k) {
        for (int64_t j = 0; j < k; ++j) o[first + j] = masked(x[j], static_cast<C>(a[first + j]));
      });
      return;
    }
    // out is contiguous and row-major, so an element's index follows from its address.
    for_each_strided<2>(
        {&out, &in}, [&](std::array<char*, 2> ptr, std::array<int64_t, 2> stride, int64_t len) {
          const int64_t first = reinterpret_cast<T*>(ptr[0]) - o;
          for (int64_t j = 0; j < len;) {
            const int64_t i = first + j;
            const auto x = philox_block(st.seed, st.offset, static_cast<uint64_t>(i / 4));
            for (int64_t lane = i % 4; lane < 4 && j < len; ++lane, ++j) {
              o[first + j] = masked(x[lane], src(ptr[1], stride[1], j));
            }
          }
        });
  });
}

void arange_kernel(const Tensor& out, double start, double step) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_ptr<T>();
    if constexpr (std::is_integral_v<T>) {
      // Integer arithmetic keeps int64 values beyond 2^53 exact.
      const auto s = static_cast<int64_t>(start), d = static_cast<int64_t>(step);
      parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = from_int64<T>(s + i * d);
      });
    } else {
      parallel_for(0, out.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          o[i] = static_cast<T>(static_cast<Compute<T>>(start + static_cast<double>(i) * step));
        }
      });
    }
  });
}

}  // namespace

void register_random_kernels(KernelTable& table) {
  table.uniform = uniform_kernel;
  table.normal = normal_kernel;
  table.randint = randint_kernel;
  table.dropout = dropout_kernel;
  table.arange = arange_kernel;
}

}  // namespace tessera::cpu
