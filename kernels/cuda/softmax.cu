// softmax / log_softmax along one dim on CUDA, numerically stable: exp(x - max) / sum and
// (x - max) - log(sum exp(x - max)), computed in float (double for float64) as the CPU twin
// (kernels/cpu/softmax.cpp). See Note [CUDA row kernels] in kernels/cuda/nn_kernels.h.
//
// Each thread keeps an online (max, sum of exp(x - max)) pair over its share of a row, rescaling
// the sum when the max grows, so a row is read twice (statistics, then output) instead of three
// times. Two kernels:
//  - rows: a group of threads per row (Note [Deterministic group reductions]), for a dim that is
//    the input's fastest (the common last-dim case: coalesced along the row);
//  - columns: one thread per row, for a dim with a larger stride than some other dim (e.g. dim 0
//    of a contiguous matrix): neighbouring threads read neighbouring rows, which is coalesced.

#include <algorithm>
#include <limits>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/nn_kernels.h"

namespace tessera::cuda {

namespace {

// exp(d) with results below the normal range flushed to 0, as the CPU twin: a masked (-inf or
// very negative) logit gets probability exactly 0.
template <typename A>
__device__ __forceinline__ A exp_flushed(A d) {
  constexpr A kLogMinNormal = std::is_same_v<A, float> ? A(-87.33654f) : A(-708.3964185322641);
  return d < kLogMinNormal ? A(0) : exp_of(d);
}

// Running max m and sum s of exp(x - m). An all -inf prefix keeps s = 0 (no exp(-inf + inf)).
template <typename A>
struct Online {
  A m = -std::numeric_limits<A>::infinity();
  A s = 0;
  __device__ void add(A v) {
    if (v > m) {
      s = (s == A(0) ? A(0) : s * exp_of(m - v)) + A(1);
      m = v;
    } else if (v > -std::numeric_limits<A>::infinity() || v != v) {
      s += exp_of(v - m);
    }
  }
  // The sum rescaled to a (larger or equal) max M.
  __device__ A sum_at(A max) const { return s == A(0) ? A(0) : s * exp_of(m - max); }
};

template <typename D, typename A>
__device__ __forceinline__ D softmax_value(A v, A max, A denom, bool log) {
  return store_as<D>(log ? (v - max) - denom : exp_flushed(v - max) / denom);
}

template <typename D>
__global__ void __launch_bounds__(kBlockSize)
    softmax_rows_kernel(const D* in, D* out, RowOffsets r, bool log) {
  using A = float_acc_of<D>;
  __shared__ A scratch[kBlockSize];
  const int64_t n = r.row_len;
  const int64_t si = r.in_elems.ndim == 0 ? 0 : r.in_elems.strides[0];
  const int64_t so = r.out_elems.ndim == 0 ? 0 : r.out_elems.strides[0];
  const int64_t per_block = blockDim.y;
  // The loop bound is uniform over the block: group_reduce may synchronize it.
  for (int64_t base = blockIdx.x * per_block; base < r.num_rows; base += gridDim.x * per_block) {
    const int64_t row = base + threadIdx.y;
    const bool active = row < r.num_rows;
    const D* x = in + (active ? fast_offset(r.in_rows, row) : 0);
    Online<A> acc;
    if (active) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) acc.add(load_as<A>(x[j * si]));
    }
    const A max = group_reduce(acc.m, MaxOp<A>{}, scratch);
    const A sum = group_reduce(acc.sum_at(max), SumOp<A>{}, scratch);
    if (!active) continue;
    const A denom = log ? log_of(sum) : sum;
    D* y = out + fast_offset(r.out_rows, row);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      y[j * so] = softmax_value<D>(load_as<A>(x[j * si]), max, denom, log);
    }
  }
}

template <typename D>
__global__ void softmax_columns_kernel(const D* in, D* out, RowOffsets r, bool log) {
  using A = float_acc_of<D>;
  const int64_t n = r.row_len;
  const int64_t si = r.in_elems.strides[0];
  const int64_t so = r.out_elems.strides[0];
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < r.num_rows;
       row += gridDim.x * int64_t{blockDim.x}) {
    const D* x = in + fast_offset(r.in_rows, row);
    Online<A> acc;
    for (int64_t j = 0; j < n; ++j) acc.add(load_as<A>(x[j * si]));
    const A sum = acc.sum_at(acc.m);  // s, or NaN when the max is +inf (as the CPU twin)
    const A denom = log ? log_of(sum) : sum;
    D* y = out + fast_offset(r.out_rows, row);
    for (int64_t j = 0; j < n; ++j)
      y[j * so] = softmax_value<D>(load_as<A>(x[j * si]), acc.m, denom, log);
  }
}

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

}  // namespace

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  const char* op = log ? "log_softmax" : "softmax";
  const DeviceGuard guard(in.device());
  const RowOffsets r = row_offsets(in.transpose(dim, -1), out.transpose(dim, -1), 1, op);
  const cudaStream_t stream = current_cuda_stream();
  // Columns when another dim is faster than `dim` (see the file comment).
  const bool columns = r.in_elems.ndim == 1 && r.in_rows.ndim > 0 &&
                       abs64(r.in_rows.strides[0]) < abs64(r.in_elems.strides[0]);
  visit_dtype(in.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      const D* x = device_ptr<const D>(in);
      D* y = device_ptr<D>(out);
      if (columns) {
        softmax_columns_kernel<<<grid_for(r.num_rows), kBlockSize, 0, stream>>>(x, y, r, log);
      } else {
        const unsigned g = group_size(r.row_len);
        const unsigned per_block = kBlockSize / g;
        const int64_t blocks = (r.num_rows + per_block - 1) / per_block;
        softmax_rows_kernel<<<static_cast<unsigned>(std::min<int64_t>(blocks, 65535 * 8)),
                              dim3(g, per_block), 0, stream>>>(x, y, r, log);
      }
      TS_CUDA_CHECK_LAUNCH(op);
    } else {
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ", in.dtype());
    }
  });
}

}  // namespace tessera::cuda
