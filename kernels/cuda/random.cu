// CUDA Philox random fills: uniform, normal, randint, dropout. Each thread handles one 128-bit
// counter and the (up to 4) elements it feeds, with exactly the element -> counter mapping of
// Note [Philox counter layout] (kernels/cpu/random.cpp), so that CUDA and CPU draw the same
// numbers for the same PhiloxState: bitwise for uniform, randint and dropout, within a few ulps
// for normal (the device's log, sin and cos round differently from the host's).
//
// nvcc fuses a * b + c into an FMA by default; the CPU kernels round the product first, so the
// arithmetic that must match bitwise uses explicit _rn intrinsics, which are never fused.

#include <cmath>
#include <numbers>
#include <type_traits>

#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/launch.cuh"
#include "tessera/runtime/generator.h"

namespace tessera::cuda {

namespace {

// float for the reduced floating types, as on the CPU.
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C>
__device__ __forceinline__ C mul_rn(C a, C b) {
  if constexpr (std::is_same_v<C, double>) {
    return __dmul_rn(a, b);
  } else {
    return __fmul_rn(a, b);
  }
}
template <typename C>
__device__ __forceinline__ C add_rn(C a, C b) {
  if constexpr (std::is_same_v<C, double>) {
    return __dadd_rn(a, b);
  } else {
    return __fadd_rn(a, b);
  }
}

// Calls body(lanes, first, count) for counter c of [0, ceil(n / Per)) in a grid-stride loop;
// `first` is the first element counter c feeds and `count` how many (Per, fewer for the last).
template <int Per, typename Body>
__device__ __forceinline__ void for_each_counter(PhiloxState st, int64_t n, const Body& body) {
  const int64_t counters = (n + Per - 1) / Per;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < counters;
       c += stride) {
    const int64_t first = c * Per;
    const int count = n - first < Per ? static_cast<int>(n - first) : Per;
    body(philox_block(st.seed, st.offset, static_cast<uint64_t>(c)), first, count);
  }
}

template <int Per>
unsigned grid_for_counters(int64_t n) {
  return grid_for((n + Per - 1) / Per);
}

// lo + range * u rounded to T; a value that rounds to `high` becomes `low` (see the Note).
template <typename T>
__device__ __forceinline__ T uniform_value(Compute<T> lo, Compute<T> range, double high,
                                           Compute<T> u) {
  using C = Compute<T>;
  const C c = add_rn(lo, mul_rn(range, u));
  if constexpr (std::is_same_v<T, C>) {
    return static_cast<double>(c) >= high ? lo : c;
  } else {
    const T v = from_float<T>(c);
    return static_cast<double>(to_float(v)) >= high ? from_float<T>(lo) : v;
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    uniform_kernel_typed(int64_t n, T* out, PhiloxState st, Compute<T> lo, Compute<T> range,
                         double high) {
  if constexpr (std::is_same_v<T, double>) {
    for_each_counter<2>(st, n, [&](const auto& x, int64_t first, int count) {
      for (int j = 0; j < count; ++j) {
        out[first + j] =
            uniform_value<T>(lo, range, high, philox_uniform_double(x[2 * j], x[2 * j + 1]));
      }
    });
  } else {
    for_each_counter<4>(st, n, [&](const auto& x, int64_t first, int count) {
      for (int j = 0; j < count; ++j) {
        out[first + j] = uniform_value<T>(lo, range, high, philox_uniform_float(x[j]));
      }
    });
  }
}

// Box-Muller on (u1, u2), u1 in (0, 1]: writes mu + sigma r cos(theta) and, when count > 1,
// mu + sigma r sin(theta) to dst. The precise log/sqrt/sin/cos, never the fast intrinsics.
template <typename T>
__device__ __forceinline__ void box_muller(Compute<T> u1, Compute<T> u2, Compute<T> mu,
                                           Compute<T> sigma, T* dst, int count) {
  using C = Compute<T>;
  constexpr C kTwoPi = 2 * std::numbers::pi_v<C>;
  const C r = sqrt(mul_rn(C(-2), log(u1)));
  const C theta = mul_rn(kTwoPi, u2);
  const C sr = mul_rn(sigma, r);
  dst[0] = from_opmath<T>(add_rn(mu, mul_rn(sr, cos(theta))));
  if (count > 1) dst[1] = from_opmath<T>(add_rn(mu, mul_rn(sr, sin(theta))));
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    normal_kernel_typed(int64_t n, T* out, PhiloxState st, Compute<T> mu, Compute<T> sigma) {
  if constexpr (std::is_same_v<T, double>) {
    for_each_counter<2>(st, n, [&](const auto& x, int64_t first, int count) {
      const double u1 = __dadd_rn(philox_uniform_double(x[0], x[1]), 0x1p-53);
      box_muller<T>(u1, philox_uniform_double(x[2], x[3]), mu, sigma, out + first, count);
    });
  } else {
    for_each_counter<4>(st, n, [&](const auto& x, int64_t first, int count) {
      for (int pair = 0; 2 * pair < count; ++pair) {
        const float u1 = __fadd_rn(philox_uniform_float(x[2 * pair]), 0x1p-24f);
        box_muller<T>(u1, philox_uniform_float(x[2 * pair + 1]), mu, sigma, out + first + 2 * pair,
                      count - 2 * pair);
      }
    });
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    randint_kernel_typed(int64_t n, T* out, PhiloxState st, int64_t low, uint64_t range) {
  for_each_counter<2>(st, n, [&](const auto& x, int64_t first, int count) {
    for (int j = 0; j < count; ++j) {
      const uint64_t w = (static_cast<uint64_t>(x[2 * j]) << 32) | x[2 * j + 1];
      out[first + j] = from_int64<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + w % range));
    }
  });
}

// out[i] = in[i] * (kept ? scale : 0), kept = (x_i >> 8) < threshold. threshold 0 (p == 1)
// keeps nothing and draws nothing. in is addressed through in_calc unless contiguous.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    dropout_kernel_typed(int64_t n, T* out, const T* in, OffsetCalc in_calc, bool contiguous,
                         PhiloxState st, uint32_t threshold, Compute<T> scale) {
  using C = Compute<T>;
  const int64_t counters = (n + 3) / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < counters;
       c += stride) {
    const int64_t first = c * 4;
    const int count = n - first < 4 ? static_cast<int>(n - first) : 4;
    uint32_t x[4] = {0, 0, 0, 0};
    if (threshold != 0) {
      const auto lanes = philox_block(st.seed, st.offset, static_cast<uint64_t>(c));
      for (int j = 0; j < 4; ++j) x[j] = lanes[j];
    }
    for (int j = 0; j < count; ++j) {
      const int64_t i = first + j;
      const C a = to_opmath<T>(in[contiguous ? i : in_calc.offset(i)]);
      out[i] = from_opmath<T>(mul_rn(a, (x[j] >> 8) < threshold ? scale : C(0)));
    }
  }
}

// visit_dtype restricted to the floating dtypes (the entry points validated that).
template <typename F>
void visit_floating(const Tensor& t, const char* op, const F& f) {
  TS_INTERNAL_ASSERT(is_floating_point(t.dtype()), "[", op, "] kernel called on ", t.dtype());
  visit_dtype(t.dtype(), [&](auto tag) {
    using U = decltype(tag);
    if constexpr (std::is_floating_point_v<U> || kIsReducedFloat<U>) f(U{});
  });
}

void uniform_kernel(const Tensor& out, PhiloxState st, double low, double high) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_cuda_stream();
  visit_floating(out, "uniform", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    constexpr int kPer = std::is_same_v<T, double> ? 2 : 4;
    uniform_kernel_typed<T><<<grid_for_counters<kPer>(n), kBlockSize, 0, stream>>>(
        n, device_ptr<T>(out), st, static_cast<C>(low), static_cast<C>(high - low), high);
  });
  TS_CUDA_CHECK_LAUNCH("uniform");
}

void normal_kernel(const Tensor& out, PhiloxState st, double mean, double stddev) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_cuda_stream();
  visit_floating(out, "normal", [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    constexpr int kPer = std::is_same_v<T, double> ? 2 : 4;
    normal_kernel_typed<T><<<grid_for_counters<kPer>(n), kBlockSize, 0, stream>>>(
        n, device_ptr<T>(out), st, static_cast<C>(mean), static_cast<C>(stddev));
  });
  TS_CUDA_CHECK_LAUNCH("normal");
}

void randint_kernel(const Tensor& out, PhiloxState st, int64_t low, int64_t high) {
  TS_INTERNAL_ASSERT(low < high, "[randint] kernel called with low ", low, " >= high ", high);
  const int64_t n = out.numel();
  if (n == 0) return;
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_cuda_stream();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    randint_kernel_typed<T>
        <<<grid_for_counters<2>(n), kBlockSize, 0, stream>>>(n, device_ptr<T>(out), st, low, range);
  });
  TS_CUDA_CHECK_LAUNCH("randint");
}

void dropout_kernel(const Tensor& out, const Tensor& in, PhiloxState st, double p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_cuda_stream();
  const bool contiguous = in.is_contiguous();
  OffsetCalc in_calc;
  if (!contiguous) in_calc = offset_calc(collapse_dims<2>(out.sizes(), {&out, &in}), 1, "dropout");
  // u < 1 - p for u = (x >> 8) * 2^-24 is (x >> 8) < ceil((1 - p) * 2^24), exactly; p >= 1
  // keeps nothing (out = in * 0, so NaN and inf inputs give NaN, as on the CPU).
  const bool drop_all = p >= 1.0;
  const auto threshold =
      drop_all ? uint32_t{0} : static_cast<uint32_t>(std::ceil((1.0 - p) * 0x1p24));
  const double scale = drop_all ? 0.0 : 1.0 / (1.0 - p);
  visit_floating(out, "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel_typed<T><<<grid_for_counters<4>(n), kBlockSize, 0, stream>>>(
        n, device_ptr<T>(out), device_ptr<const T>(in), in_calc, contiguous, st, threshold,
        static_cast<Compute<T>>(scale));
  });
  TS_CUDA_CHECK_LAUNCH("dropout");
}

}  // namespace

void register_random_kernels(KernelTable& table) {
  table.uniform = uniform_kernel;
  table.normal = normal_kernel;
  table.randint = randint_kernel;
  table.dropout = dropout_kernel;
}

}  // namespace tessera::cuda
