// Reductions over a set of dims on CUDA: sum, prod, mean, amax/amin, argmax/argmin, var, norm.
// Same semantics and accumulation types as kernels/cpu/reduction.cpp (its CPU twin).
//
// Note [CUDA reduction loops]
// The host drops size-1 dims, orders the reduced dims by decreasing stride and coalesces
// adjacent dims (as the CPU twin), so that the innermost reduced dim has the smallest stride.
// Then one of two kernels runs, both over "items" = (output, part of its reduced range):
//  - inner (the innermost reduced dim is the input's fastest): a group of G threads per item
//    (a warp for short rows, the whole block for long ones) strides along the reduced positions
//    (in 16-byte vectors when they are contiguous), then combines in a fixed tree (Note
//    [Deterministic group reductions]).
//  - outer (a kept dim is the fastest, e.g. sum over dim 0 of a contiguous [N, M]): 32 threads
//    take 32 adjacent outputs (coalesced loads), 8 thread rows split the reduced positions, and
//    the 8 partial values are merged in order through shared memory.
// When outputs are too few to fill the GPU, each output's range is split into `parts` chunks;
// the partial accumulators go to a scratch buffer that a third kernel merges in chunk order.
// Every order is fixed by the shapes, the data's 16-byte alignment and the device's SM count, so
// results are bitwise reproducible run to run; no atomics are used.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include "tessera/kernels/cuda/block_reduce.cuh"
#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/launch.cuh"
#include "tessera/kernels/reduction_geometry.h"

namespace tessera::cuda {

namespace {

constexpr int kOuterX = 32;               // outputs per block of the outer kernel
constexpr int kOuterY = 8;                // thread rows splitting the reduced positions
constexpr int64_t kMinInnerChunk = 4096;  // reduced positions per item, at least, when splitting
constexpr int64_t kMinOuterChunk = 512;   // reduced rows per part, at least, when splitting

template <typename V>
__device__ __forceinline__ bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}

// x replaces a when larger (max) or smaller, or NaN: NaN wins, as in PyTorch and the CPU twin.
template <typename V>
__device__ __forceinline__ V pick(bool max, V a, V x) {
  const bool better = max ? x > a : x < a;
  return (better || is_nan(x)) ? x : a;
}

template <typename V>
__host__ __device__ V lowest_or_highest(bool lowest) {
  if constexpr (std::numeric_limits<V>::has_infinity) {
    return lowest ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  } else {
    return lowest ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
  }
}

// Comparison type of amax/argmax: floats compare in float (double), integers as themselves,
// bool as uint8.
template <typename D>
using cmp_of = std::conditional_t<kIsDeviceFloat<D>, acc_of<D>,
                                  std::conditional_t<std::is_same_v<D, bool>, uint8_t, D>>;

template <typename A>
__device__ __forceinline__ A abs_of(A v) {
  return v < A(0) ? -v : v;
}

// ---- reducers: init(output), step(acc, x, position), merge(acc, acc), finish(acc, count) ----
// Runtime flags (prod/mean, max/min, the norm's kind) keep one instantiation per dtype.

template <typename D, typename O>
struct SumReducer {
  using In = D;
  using Acc = acc_of<D>;
  using Out = O;
  bool prod = false;
  bool mean = false;
  __device__ Acc init(int64_t) const { return Acc(prod ? 1 : 0); }
  __device__ void step(Acc& a, D x, int64_t) const { a = merge(a, load_as<Acc>(x)); }
  __device__ Acc merge(Acc a, Acc b) const { return prod ? a * b : a + b; }
  __device__ Out finish(Acc a, int64_t n) const {
    return store_as<Out>(mean ? a / static_cast<Acc>(n) : a);
  }
};

template <typename D>
struct ExtremeReducer {
  using In = D;
  using Acc = cmp_of<D>;
  using Out = D;
  bool max = true;
  __device__ Acc init(int64_t) const { return lowest_or_highest<Acc>(max); }
  __device__ void step(Acc& a, D x, int64_t) const { a = pick(max, a, load_as<Acc>(x)); }
  __device__ Acc merge(Acc a, Acc b) const { return pick(max, a, b); }
  __device__ Out finish(Acc a, int64_t) const { return store_as<Out>(a); }
};

// First position of the extreme; NaN counts as the extreme, its first occurrence wins.
template <typename D>
struct ArgReducer {
  using In = D;
  using V = cmp_of<D>;
  struct Acc {
    V v;
    int64_t i;  // -1: nothing seen yet
  };
  using Out = int64_t;
  bool max = true;
  __device__ Acc init(int64_t) const { return {lowest_or_highest<V>(max), -1}; }
  __device__ bool better(V x, V y) const {
    return (max ? x > y : x < y) || (is_nan(x) && !is_nan(y));
  }
  __device__ void step(Acc& a, D x, int64_t i) const {
    const V v = load_as<V>(x);
    if (a.i < 0 || better(v, a.v)) a = {v, i};
  }
  __device__ Acc merge(Acc a, Acc b) const {
    if (b.i < 0) return a;
    const bool same = a.v == b.v || (is_nan(a.v) && is_nan(b.v));
    return (a.i < 0 || better(b.v, a.v) || (same && b.i < a.i)) ? b : a;
  }
  __device__ Out finish(Acc a, int64_t) const { return a.i; }
};

// Second pass of var (the first computes the means): sums of d = x - mean and d^2, so that the
// mean's own rounding cancels (m2 = sum d^2 - (sum d)^2 / n), stable for data with a large mean.
template <typename D>
struct VarReducer {
  using In = D;
  using A = float_acc_of<D>;
  struct Acc {
    A mean, s1, s2;
  };
  using Out = D;
  const A* means = nullptr;
  double correction = 0;
  __device__ Acc init(int64_t o) const { return {means[o], A(0), A(0)}; }
  __device__ void step(Acc& a, D x, int64_t) const {
    const A d = load_as<A>(x) - a.mean;
    a.s1 += d;
    a.s2 += d * d;
  }
  __device__ Acc merge(Acc a, Acc b) const { return {a.mean, a.s1 + b.s1, a.s2 + b.s2}; }
  __device__ Out finish(Acc a, int64_t n) const {
    A m2 = a.s2 - a.s1 * a.s1 / static_cast<A>(n);
    if (m2 < A(0)) m2 = A(0);  // rounding; keeps NaN
    const double nd = static_cast<double>(n);
    const double dof = nd > correction ? nd - correction : 0.0;
    return store_as<Out>(m2 / static_cast<A>(dof));
  }
};

enum class NormKind : int { kZero, kOne, kTwo, kInf, kNegInf, kGeneral };

template <typename D>
struct NormReducer {
  using In = D;
  using Acc = float_acc_of<D>;
  using Out = D;
  NormKind kind = NormKind::kTwo;
  Acc p = 2;
  __device__ bool extreme() const { return kind == NormKind::kInf || kind == NormKind::kNegInf; }
  __device__ Acc init(int64_t) const {
    return kind == NormKind::kNegInf ? std::numeric_limits<Acc>::infinity() : Acc(0);
  }
  __device__ void step(Acc& a, D x, int64_t) const {
    const Acc v = abs_of(load_as<Acc>(x));
    switch (kind) {
      case NormKind::kZero:
        a += v != Acc(0) ? Acc(1) : Acc(0);
        break;
      case NormKind::kOne:
        a += v;
        break;
      case NormKind::kTwo:
        a += v * v;
        break;
      case NormKind::kInf:
      case NormKind::kNegInf:
        a = merge(a, v);
        break;
      case NormKind::kGeneral:
        a += pow_of(v, p);
        break;
    }
  }
  __device__ Acc merge(Acc a, Acc b) const {
    return extreme() ? pick(kind == NormKind::kInf, a, b) : a + b;
  }
  __device__ Out finish(Acc a, int64_t) const {
    if (kind == NormKind::kTwo) return store_as<Out>(sqrt_of(a));
    if (kind == NormKind::kGeneral) return store_as<Out>(pow_of(a, Acc(1) / p));
    return store_as<Out>(a);
  }
};

// ---- kernels (see Note [CUDA reduction loops]) ----

struct Launch {
  OffsetCalc keep, red;
  int64_t num_out = 0;
  int64_t num_red = 0;
  int64_t chunk = 0;  // reduced positions per part
  int64_t parts = 1;
  bool contiguous = false;  // one reduced dim of stride 1: runs read in 16-byte vectors
};

// Steps over the contiguous positions [begin, end) of a run, the group's threads taking every
// blockDim.x-th: scalars up to the first 16-byte aligned address, then aligned 16-byte vectors,
// then the scalar tail. Each thread still sees its positions in increasing order (argmax's ties).
template <typename R>
__device__ void step_run(const R& r, typename R::Acc& acc, const typename R::In* run, int64_t begin,
                         int64_t end) {
  using In = typename R::In;
  constexpr int kVec = sizeof(In) < 16 ? static_cast<int>(16 / sizeof(In)) : 1;
  struct alignas(16) Pack {
    In v[kVec];
  };
  const int64_t g = blockDim.x;
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(run + begin) % 16);
  const int64_t head = min((16 - misalign) % 16 / static_cast<int64_t>(sizeof(In)), end - begin);
  const int64_t body = begin + head;
  const int64_t packs = (end - body) / kVec;
  const int64_t tail = body + packs * kVec;
  for (int64_t i = begin + threadIdx.x; i < body; i += g) r.step(acc, run[i], i);
  const Pack* p = reinterpret_cast<const Pack*>(run + body);
  for (int64_t k = threadIdx.x; k < packs; k += g) {
    const Pack pack = p[k];
#pragma unroll
    for (int j = 0; j < kVec; ++j) r.step(acc, pack.v[j], body + k * kVec + j);
  }
  for (int64_t i = tail + threadIdx.x; i < end; i += g) r.step(acc, run[i], i);
}

template <typename R>
__global__ void __launch_bounds__(kBlockSize)
    reduce_inner_kernel(R r, const typename R::In* in, typename R::Out* out,
                        typename R::Acc* partial, Launch l) {
  using Acc = typename R::Acc;
  alignas(16) __shared__ unsigned char smem[kBlockSize * sizeof(Acc)];
  Acc* scratch = reinterpret_cast<Acc*>(smem);
  const int64_t items = l.num_out * l.parts;
  const int64_t per_block = blockDim.y;
  // The loop bound is uniform over the block: group_reduce_shared synchronizes it.
  for (int64_t base = blockIdx.x * per_block; base < items; base += gridDim.x * per_block) {
    const int64_t item = base + threadIdx.y;
    const bool active = item < items;
    Acc acc{};
    if (active) {
      const int64_t o = item / l.parts;
      const int64_t begin = (item % l.parts) * l.chunk;
      const int64_t end = min(begin + l.chunk, l.num_red);
      const typename R::In* row = in + fast_offset(l.keep, o);
      acc = r.init(o);
      if (l.contiguous) {
        step_run(r, acc, row, begin, end);
      } else {
        for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
          r.step(acc, row[fast_offset(l.red, i)], i);
        }
      }
    }
    acc = group_reduce_shared(
        acc, [&](Acc a, Acc b) { return r.merge(a, b); }, scratch);
    if (active && threadIdx.x == 0) {
      if (l.parts == 1) {
        out[item] = r.finish(acc, l.num_red);
      } else {
        partial[item] = acc;
      }
    }
  }
}

template <typename R>
__global__ void __launch_bounds__(kOuterX* kOuterY)
    reduce_outer_kernel(R r, const typename R::In* in, typename R::Out* out,
                        typename R::Acc* partial, Launch l) {
  using Acc = typename R::Acc;
  alignas(16) __shared__ unsigned char smem[kOuterX * kOuterY * sizeof(Acc)];
  Acc* rows = reinterpret_cast<Acc*>(smem);
  const int64_t part = blockIdx.y;
  const int64_t begin = part * l.chunk;
  const int64_t end = min(begin + l.chunk, l.num_red);
  const unsigned tx = threadIdx.x;
  const unsigned ty = threadIdx.y;
  for (int64_t base = blockIdx.x * int64_t{kOuterX}; base < l.num_out;
       base += gridDim.x * int64_t{kOuterX}) {
    const int64_t o = base + tx;
    const bool active = o < l.num_out;
    Acc acc{};
    if (active) {
      const typename R::In* col = in + fast_offset(l.keep, o);
      acc = r.init(o);
      for (int64_t i = begin + ty; i < end; i += kOuterY)
        r.step(acc, col[fast_offset(l.red, i)], i);
    }
    rows[ty * kOuterX + tx] = acc;
    __syncthreads();
    if (active && ty == 0) {
      for (int k = 1; k < kOuterY; ++k) acc = r.merge(acc, rows[k * kOuterX + tx]);
      if (l.parts == 1) {
        out[o] = r.finish(acc, l.num_red);
      } else {
        partial[o * l.parts + part] = acc;
      }
    }
    __syncthreads();
  }
}

// Merges each output's partial accumulators in part order.
template <typename R>
__global__ void reduce_merge_kernel(R r, const typename R::Acc* partial, typename R::Out* out,
                                    Launch l) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < l.num_out;
       o += gridDim.x * int64_t{blockDim.x}) {
    const typename R::Acc* p = partial + o * l.parts;
    typename R::Acc acc = p[0];
    for (int64_t k = 1; k < l.parts; ++k) acc = r.merge(acc, p[k]);
    out[o] = r.finish(acc, l.num_red);
  }
}

// ---- host side ----

using ::tessera::detail::Dims;
using Geometry = ::tessera::detail::ReductionGeometry;

Geometry make_geometry(const Tensor& in, const std::vector<int64_t>& dims) {
  Geometry g = ::tessera::detail::reduction_geometry(in, dims);
  if (g.num_red == 0) g.red = Dims{};  // an empty reduction reads no input
  return g;
}

int sm_count() {
  int device = 0;
  int sms = 0;
  TS_CUDA_CHECK("reduce", cudaGetDevice(&device));
  TS_CUDA_CHECK("reduce", cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Splits each output's n positions into parts of at least `min_chunk` when `blocks` blocks
// would leave the GPU idle; sets l.chunk / l.parts.
void split(Launch& l, int64_t blocks, int64_t target_blocks, int64_t min_chunk, int64_t max_parts) {
  l.parts = 1;
  l.chunk = std::max<int64_t>(l.num_red, 1);
  if (blocks >= target_blocks || l.num_red < 2 * min_chunk) return;
  const int64_t parts =
      std::min({ceil_div(target_blocks, blocks), l.num_red / min_chunk, max_parts});
  l.chunk = ceil_div(l.num_red, parts);
  l.parts = ceil_div(l.num_red, l.chunk);
}

template <typename R>
void run(const R& r, typename R::Out* out, const Tensor& in, const Geometry& g, const char* op) {
  using Acc = typename R::Acc;
  Launch l;
  l.keep = offset_calc(g.keep.sizes, g.keep.strides, op);
  l.red = offset_calc(g.red.sizes, g.red.strides, op);
  l.num_out = g.keep.numel();
  l.num_red = g.num_red;
  const auto* data = device_ptr<const typename R::In>(in);
  const cudaStream_t stream = current_cuda_stream();
  const int64_t target = 4 * int64_t{sm_count()};
  const bool outer = !g.keep.sizes.empty() && !g.red.sizes.empty() && g.keep.strides.back() != 0 &&
                     (g.red.strides.back() == 0 ||
                      std::abs(g.keep.strides.back()) < std::abs(g.red.strides.back()));
  Tensor scratch;
  Acc* partial = nullptr;
  auto make_partial = [&] {
    if (l.parts == 1) return;
    scratch = Tensor::make_empty({l.num_out * l.parts * static_cast<int64_t>(sizeof(Acc))}, kUInt8,
                                 in.device());
    partial = reinterpret_cast<Acc*>(device_ptr<uint8_t>(scratch));
  };
  if (outer) {
    const int64_t tiles = ceil_div(l.num_out, kOuterX);
    split(l, tiles, target, kMinOuterChunk, 65535);
    make_partial();
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(tiles, 32 * target)),
                    static_cast<unsigned>(l.parts));
    reduce_outer_kernel<<<grid, dim3(kOuterX, kOuterY), 0, stream>>>(r, data, out, partial, l);
  } else {
    const int64_t rows_if_whole = ceil_div(l.num_out, kBlockSize / group_size(l.num_red));
    split(l, rows_if_whole, target, kMinInnerChunk, 4096);
    make_partial();
    l.contiguous = g.red.sizes.size() == 1 && g.red.strides[0] == 1;
    const unsigned gs = group_size(l.chunk);
    const unsigned per_block = kBlockSize / gs;
    const int64_t blocks = ceil_div(l.num_out * l.parts, per_block);
    reduce_inner_kernel<<<static_cast<unsigned>(std::min<int64_t>(blocks, 32 * target)),
                          dim3(gs, per_block), 0, stream>>>(r, data, out, partial, l);
  }
  TS_CUDA_CHECK_LAUNCH(op);
  if (l.parts > 1) {
    reduce_merge_kernel<<<grid_for(l.num_out), kBlockSize, 0, stream>>>(r, partial, out, l);
    TS_CUDA_CHECK_LAUNCH(op);
  }
}

template <typename R>
void run(const R& r, const Tensor& out, const Tensor& in, const Geometry& g, const char* op) {
  run(r, device_ptr<typename R::Out>(out), in, g, op);
}

template <typename D>
void run_var(const Tensor& out, const Tensor& in, const Geometry& g, double correction) {
  using A = float_acc_of<D>;
  const Tensor means = Tensor::make_empty({g.keep.numel()}, dtype_of<A>, in.device());
  SumReducer<D, A> mean;
  mean.mean = true;
  run(mean, device_ptr<A>(means), in, g, "var");
  VarReducer<D> var;
  var.means = device_ptr<const A>(means);
  var.correction = correction;
  run(var, out, in, g, "var");
}

template <typename D>
void run_norm(const Tensor& out, const Tensor& in, const Geometry& g, double p) {
  NormReducer<D> r;
  r.p = static_cast<typename NormReducer<D>::Acc>(p);
  if (p == 0) {
    r.kind = NormKind::kZero;
  } else if (p == 1) {
    r.kind = NormKind::kOne;
  } else if (p == 2) {
    r.kind = NormKind::kTwo;
  } else if (std::isinf(p)) {
    r.kind = p > 0 ? NormKind::kInf : NormKind::kNegInf;
  } else {
    r.kind = NormKind::kGeneral;
  }
  run(r, out, in, g, "norm");
}

void reduce_kernel(ReductionOp op, const Tensor& out, const Tensor& in,
                   const std::vector<int64_t>& dims, double param) {
  if (out.numel() == 0) return;
  const DeviceGuard guard(in.device());
  const Geometry g = make_geometry(in, dims);
  const char* name = op_name(op);
  visit_dtype(in.dtype(), [&](auto tag) {
    using D = decltype(tag);
    constexpr bool kFloat = kIsDeviceFloat<D>;
    // Integral sums and products give int64 (see runtime/ops/reduction.cpp).
    using SumOut = std::conditional_t<kFloat, D, int64_t>;
    switch (op) {
      case ReductionOp::kSum:
      case ReductionOp::kProd:
      case ReductionOp::kMean: {
        if (op == ReductionOp::kMean && !kFloat) break;
        SumReducer<D, SumOut> r;
        r.prod = op == ReductionOp::kProd;
        r.mean = op == ReductionOp::kMean;
        return run(r, out, in, g, name);
      }
      case ReductionOp::kAmax:
      case ReductionOp::kAmin: {
        ExtremeReducer<D> r;
        r.max = op == ReductionOp::kAmax;
        return run(r, out, in, g, name);
      }
      case ReductionOp::kArgmax:
      case ReductionOp::kArgmin:
        if constexpr (!std::is_same_v<D, bool>) {  // the entry point refuses bool
          ArgReducer<D> r;
          r.max = op == ReductionOp::kArgmax;
          return run(r, out, in, g, name);
        }
        break;
      case ReductionOp::kVar:
        if constexpr (kFloat) return run_var<D>(out, in, g, param);
        break;
      case ReductionOp::kNorm:
        if constexpr (kFloat) return run_norm<D>(out, in, g, param);
        break;
    }
    TS_INTERNAL_ASSERT(false, "[", name, "] no CUDA kernel for input dtype ", in.dtype());
  });
}

}  // namespace

void register_reduction_kernels(KernelTable& table) { table.reduce = reduce_kernel; }

}  // namespace tessera::cuda
