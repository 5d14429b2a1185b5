// layer_norm and rms_norm over the trailing norm_ndim dims of each row on CUDA, the twin of
// kernels/cpu/norm.cpp: statistics in float (double for float64) with two passes over the row
// (mean, then centered squares) so that a large mean does not cancel the variance, then a third
// pass writes the output. One kernel serves both norms (rms: no centering, no bias). A group of
// threads takes a row (Note [Deterministic group reductions]); rows are addressed as Note [CUDA
// row kernels] says. The passes re-read the row, which L1/L2 hold for the row sizes of practice.

#include <algorithm>
#include <cmath>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/nn_kernels.h"

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

}  // namespace

void layer_norm_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, int64_t norm_ndim, double eps) {
  run_norm("layer_norm", out, mean, rstd, in, weight, bias, norm_ndim, eps);
}

void rms_norm_kernel(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     int64_t norm_ndim, double eps) {
  run_norm("rms_norm", out, Tensor(), rstd, in, weight, Tensor(), norm_ndim, eps);
}

}  // namespace tessera::cuda
