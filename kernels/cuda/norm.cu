// layer_norm and rms_norm over the trailing norm_ndim dims of each row on CUDA, the twin of
// kernels/cpu/norm.cpp: statistics in float (double for float64) with two passes over the row
// (mean, then centered squares) so that a large mean does not cancel the variance, then a third
// pass writes the output. One kernel serves both norms (rms: no centering, no bias). A group of
// threads takes a row (Note [Deterministic group reductions]); rows are addressed as Note [CUDA
// row kernels] says. The passes re-read the row, which L1/L2 hold for the row sizes of practice.
//
// norm_backward (Note [Fused nn backward] in runtime/ops/nn_backward.cpp) is two kernels where the
// CPU twin makes one pass: the input gradient wants a group of threads per row (row sums), the
// weight and bias gradients want threads across columns (column sums, coalesced along a row),
// and no float atomics may sum them (Note [Deterministic group reductions]). The column sums
// go through per-chunk partials: chunks of rows set by the shape alone, each summed by one
// block, then added in chunk order, so the bits depend on the shape only.

#include <algorithm>
#include <cmath>

#include "tessera/kernels/cuda/block_reduce.cuh"
#include "tessera/kernels/cuda/nn_kernels.h"

namespace tessera::cuda {

namespace {

template <typename A>
struct NormArgs {
  const A* weight = nullptr;  // contiguous [row_len] or null
  const A* bias = nullptr;
  void* mean = nullptr;  // [num_rows] float32 or float64, null for rms_norm
  void* rstd = nullptr;
  bool stat_double = false;
  bool rms = false;
  A eps = 0;
};

template <typename A>
__device__ __forceinline__ void store_stat(void* p, bool as_double, int64_t i, A v) {
  if (as_double) {
    static_cast<double*>(p)[i] = static_cast<double>(v);
  } else {
    static_cast<float*>(p)[i] = static_cast<float>(v);
  }
}

template <typename D>
__global__ void __launch_bounds__(kBlockSize)
    norm_kernel(const D* in, D* out, RowOffsets r, NormArgs<float_acc_of<D>> a) {
  using A = float_acc_of<D>;
  __shared__ A scratch[kBlockSize];
  const int64_t n = r.row_len;
  const int64_t per_block = blockDim.y;
  // The loop bound is uniform over the block: group_reduce may synchronize it.
  for (int64_t base = blockIdx.x * per_block; base < r.num_rows; base += gridDim.x * per_block) {
    const int64_t row = base + threadIdx.y;
    const bool active = row < r.num_rows;
    const D* x = in + (active ? fast_offset(r.in_rows, row) : 0);
    auto at = [&](int64_t j) { return load_as<A>(x[fast_offset(r.in_elems, j)]); };
    A mu = 0;
    if (!a.rms) {
      A s = 0;
      if (active) {
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += at(j);
      }
      mu = group_reduce(s, SumOp<A>{}, scratch) / static_cast<A>(n);
    }
    A s2 = 0;
    if (active) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const A d = at(j) - mu;
        s2 += d * d;
      }
    }
    const A var = group_reduce(s2, SumOp<A>{}, scratch) / static_cast<A>(n);
    const A rstd = A(1) / sqrt_of(var + a.eps);
    if (!active) continue;
    if (threadIdx.x == 0) {
      if (!a.rms) store_stat(a.mean, a.stat_double, row, mu);
      store_stat(a.rstd, a.stat_double, row, rstd);
    }
    D* y = out + fast_offset(r.out_rows, row);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A v = (at(j) - mu) * rstd;
      if (a.weight) v *= a.weight[j];
      if (a.bias) v += a.bias[j];
      y[fast_offset(r.out_elems, j)] = store_as<D>(v);
    }
  }
}

// weight / bias (any floating dtype and strides) as a contiguous tensor of the math type, or
// undefined when absent.
Tensor param_as(const Tensor& p, DType math) {
  return p.defined() ? p.to(math).contiguous() : Tensor();
}

template <typename A>
const A* ptr_or_null(const Tensor& t) {
  return t.defined() ? device_ptr<const A>(t) : nullptr;
}

void run_norm(const char* op, const Tensor& out, const Tensor& mean, const Tensor& rstd,
              const Tensor& in, const Tensor& weight, const Tensor& bias, int64_t k, double eps) {
  if (in.numel() == 0) return;
  const DeviceGuard guard(in.device());
  const RowOffsets r = row_offsets(in, out, k, op);
  const cudaStream_t stream = current_cuda_stream();
  TS_INTERNAL_ASSERT(rstd.dtype() == kFloat32 || rstd.dtype() == kFloat64, "[", op,
                     "] statistics must be float32 or float64, got ", rstd.dtype());
  visit_dtype(in.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      using A = float_acc_of<D>;
      const Tensor w = param_as(weight, dtype_of<A>);
      const Tensor b = param_as(bias, dtype_of<A>);
      NormArgs<A> a;
      a.weight = ptr_or_null<A>(w);
      a.bias = ptr_or_null<A>(b);
      a.mean = mean.defined() ? byte_ptr(mean) : nullptr;
      a.rstd = byte_ptr(rstd);
      a.stat_double = rstd.dtype() == kFloat64;
      a.rms = !mean.defined();
      a.eps = static_cast<A>(eps);
      const unsigned g = group_size(r.row_len);
      const unsigned per_block = kBlockSize / g;
      const int64_t blocks = (r.num_rows + per_block - 1) / per_block;
      norm_kernel<<<static_cast<unsigned>(std::min<int64_t>(blocks, 65535 * 8)), dim3(g, per_block),
                    0, stream>>>(device_ptr<const D>(in), device_ptr<D>(out), r, a);
      TS_CUDA_CHECK_LAUNCH(op);
    } else {
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ", in.dtype());
    }
  });
}

// ---- norm_backward ----

// A per-row statistic of the forward (float32 or float64, contiguous), or none (rms_norm's mean).
template <typename A>
struct Stat {
  const void* p = nullptr;
  bool as_double = false;
  __device__ A at(int64_t i) const {
    if (!p) return A(0);
    return as_double ? static_cast<A>(static_cast<const double*>(p)[i])
                     : static_cast<A>(static_cast<const float*>(p)[i]);
  }
};

template <typename A>
Stat<A> stat_of(const Tensor& t) {
  Stat<A> s;
  if (t.defined()) {
    s.p = byte_ptr(t);
    s.as_double = t.dtype() == kFloat64;
  }
  return s;
}

// grad_in = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = grad * weight, rms_norm
// without mean(gw); rows of n contiguous elements.
template <typename D>
__global__ void __launch_bounds__(kBlockSize)
    norm_grad_input_kernel(D* grad_in, const D* grad, const D* in, const float_acc_of<D>* weight,
                           Stat<float_acc_of<D>> mean, Stat<float_acc_of<D>> rstd, int64_t rows,
                           int64_t n) {
  using A = float_acc_of<D>;
  __shared__ A scratch[kBlockSize];
  const A inv_n = A(1) / static_cast<A>(n);
  const bool centered = mean.p != nullptr;
  const int64_t per_block = blockDim.y;
  // The loop bound is uniform over the block: group_reduce may synchronize it.
  for (int64_t base = blockIdx.x * per_block; base < rows; base += gridDim.x * per_block) {
    const int64_t row = base + threadIdx.y;
    const bool active = row < rows;
    const int64_t first = active ? row * n : 0;
    const D* g = grad + first;
    const D* x = in + first;
    const A mu = active ? mean.at(row) : A(0);
    const A rs = active ? rstd.at(row) : A(0);
    auto gw_at = [&](int64_t j) {
      const A gv = load_as<A>(g[j]);
      return weight ? gv * weight[j] : gv;
    };
    A sum_gw = 0;
    A sum_gw_xhat = 0;
    if (active) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const A gw = gw_at(j);
        sum_gw += gw;
        sum_gw_xhat += gw * ((load_as<A>(x[j]) - mu) * rs);
      }
    }
    const A a = centered ? group_reduce(sum_gw, SumOp<A>{}, scratch) * inv_n : A(0);
    const A c = group_reduce(sum_gw_xhat, SumOp<A>{}, scratch) * inv_n;
    if (!active) continue;
    D* dx = grad_in + first;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const A xhat = (load_as<A>(x[j]) - mu) * rs;
      dx[j] = store_as<D>(rs * (gw_at(j) - a - xhat * c));
    }
  }
}

// The column sums: a block of kColumns columns by kLanes lanes of rows, one chunk of rows per
// blockIdx.y.
constexpr int kColumns = 32;
constexpr int kLanes = 8;
constexpr int kPartialThreads = kColumns * kLanes;
// Chunks of at least kChunkRows rows, at most kMaxChunks of them (the partials' memory).
constexpr int64_t kChunkRows = 64;
constexpr int64_t kMaxChunks = 256;

// partial[chunk][0][j] = sum of grad * xhat and partial[chunk][1][j] = sum of grad over the
// chunk's rows, column j. Each lane sums every kLanes-th row of the chunk, then lane 0 adds the
// lanes in order.
template <typename D>
__global__ void __launch_bounds__(kPartialThreads)
    norm_param_partials_kernel(float_acc_of<D>* partial, const D* grad, const D* in,
                               Stat<float_acc_of<D>> mean, Stat<float_acc_of<D>> rstd, int64_t rows,
                               int64_t n, int64_t chunk_rows) {
  using A = float_acc_of<D>;
  __shared__ A lanes[2][kLanes][kColumns];
  const int64_t col = blockIdx.x * int64_t{kColumns} + threadIdx.x;
  const int64_t begin = blockIdx.y * chunk_rows;
  const int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  A sw = 0;
  A sb = 0;
  if (col < n) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kLanes) {
      const A gv = load_as<A>(grad[r * n + col]);
      sw += gv * ((load_as<A>(in[r * n + col]) - mean.at(r)) * rstd.at(r));
      sb += gv;
    }
  }
  lanes[0][threadIdx.y][threadIdx.x] = sw;
  lanes[1][threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y != 0 || col >= n) return;
  for (int l = 1; l < kLanes; ++l) {
    sw += lanes[0][l][threadIdx.x];
    sb += lanes[1][l][threadIdx.x];
  }
  A* p = partial + blockIdx.y * 2 * n;
  p[col] = sw;
  p[n + col] = sb;
}

// total[i] = sum over chunks, in order, of partial[chunk][i]; m = 2 * n values per chunk.
template <typename A>
__global__ void sum_chunks_kernel(A* total, const A* partial, int64_t chunks, int64_t m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m;
       i += gridDim.x * int64_t{blockDim.x}) {
    A s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * m + i];
    total[i] = s;
  }
}

template <typename D>
void run_norm_backward(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                       const Tensor& grad, const Tensor& in, const Tensor& weight,
                       const Tensor& mean, const Tensor& rstd, const char* op) {
  using A = float_acc_of<D>;
  const int64_t rows = rstd.numel();
  const int64_t n = in.numel() / rows;
  const cudaStream_t stream = current_cuda_stream();
  const Stat<A> mu = stat_of<A>(mean);
  const Stat<A> rs = stat_of<A>(rstd);
  if (grad_in.defined()) {
    const Tensor w = param_as(weight, dtype_of<A>);
    const unsigned g = group_size(n);
    const unsigned per_block = kBlockSize / g;
    const int64_t blocks = (rows + per_block - 1) / per_block;
    norm_grad_input_kernel<<<static_cast<unsigned>(std::min<int64_t>(blocks, 65535 * 8)),
                             dim3(g, per_block), 0, stream>>>(
        device_ptr<D>(grad_in), device_ptr<const D>(grad), device_ptr<const D>(in),
        ptr_or_null<A>(w), mu, rs, rows, n);
    TS_CUDA_CHECK_LAUNCH(op);
  }
  if (!grad_weight.defined() && !grad_bias.defined()) return;
  int64_t chunks = std::clamp<int64_t>((rows + kChunkRows - 1) / kChunkRows, 1, kMaxChunks);
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  chunks = (rows + chunk_rows - 1) / chunk_rows;  // no empty chunk
  const Tensor partial = Tensor::make_empty({chunks, 2, n}, dtype_of<A>, in.device());
  const auto column_blocks = static_cast<unsigned>((n + kColumns - 1) / kColumns);
  norm_param_partials_kernel<<<dim3(column_blocks, static_cast<unsigned>(chunks)),
                               dim3(kColumns, kLanes), 0, stream>>>(
      device_ptr<A>(partial), device_ptr<const D>(grad), device_ptr<const D>(in), mu, rs, rows, n,
      chunk_rows);
  TS_CUDA_CHECK_LAUNCH(op);
  const Tensor total = Tensor::make_empty({2, n}, dtype_of<A>, in.device());
  sum_chunks_kernel<<<grid_for(2 * n), kBlockSize, 0, stream>>>(
      device_ptr<A>(total), device_ptr<const A>(partial), chunks, 2 * n);
  TS_CUDA_CHECK_LAUNCH(op);
  // Into each parameter gradient's own dtype.
  if (grad_weight.defined()) grad_weight.view({n}).copy_(total.select(0, 0));
  if (grad_bias.defined()) grad_bias.view({n}).copy_(total.select(0, 1));
}

}  // namespace

void norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                          const Tensor& grad, const Tensor& in, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd) {
  if (in.numel() == 0) return;
  const char* op = mean.defined() ? "layer_norm_backward" : "rms_norm_backward";
  const DeviceGuard guard(in.device());
  TS_INTERNAL_ASSERT(rstd.dtype() == kFloat32 || rstd.dtype() == kFloat64, "[", op,
                     "] statistics must be float32 or float64, got ", rstd.dtype());
  visit_dtype(in.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      run_norm_backward<D>(grad_in, grad_weight, grad_bias, grad, in, weight, mean, rstd, op);
    } else {
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ", in.dtype());
    }
  });
}

void layer_norm_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, int64_t norm_ndim, double eps) {
  run_norm("layer_norm", out, mean, rstd, in, weight, bias, norm_ndim, eps);
}

void rms_norm_kernel(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     int64_t norm_ndim, double eps) {
  run_norm("rms_norm", out, Tensor(), rstd, in, weight, Tensor(), norm_ndim, eps);
}

}  // namespace tessera::cuda
