// softmax / log_softmax along one dim on CUDA, numerically stable: exp(x - max) / sum and
// (x - max) - log(sum exp(x - max)), computed in float (double for float64) as the CPU twin
// (kernels/cpu/softmax.cpp); and the one-pass backward kernels that share its row math:
// softmax_backward and cross_entropy_backward (Note [Fused nn backward] in
// runtime/ops/nn_backward.cpp). See Note [CUDA row kernels] in kernels/cuda/nn_kernels.h.
//
// Each thread keeps an online (max, sum of exp(x - max)) pair over its share of a row, rescaling
// the sum when the max grows, so a row is read twice (statistics, then output) instead of three
// times. softmax and softmax_backward have two kernels each:
//  - rows: a group of threads per row (Note [Deterministic group reductions]), for a dim that is
//    the input's fastest (the common last-dim case: coalesced along the row);
//  - columns: one thread per row, for a dim with a larger stride than some other dim (e.g. dim 0
//    of a contiguous matrix): neighbouring threads read neighbouring rows, which is coalesced.
// cross_entropy_backward's logits are contiguous [N, C] rows: the rows kernel only.

#include <algorithm>
#include <limits>

#include "tessera/kernels/cuda/block_reduce.cuh"
#include "tessera/kernels/cuda/nn_kernels.h"

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
  const int64_t si = single_dim_stride(r.in_elems);
  const int64_t so = single_dim_stride(r.out_elems);
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

// ---- softmax_backward ----

// The rows of softmax backward's three operands. row_offsets pairs two operands, so y and out
// come from one call and grad from another; every OffsetCalc maps the same row index (and
// position in the row) on its own, so the pairs need not collapse alike.
struct GradRows {
  RowOffsets y_out;  // in: y, out: the gradient written
  OffsetCalc grad_rows, grad_elems;
};

// One element of the input gradient: y * (g - sum(g * y)), or for log_softmax
// g - exp(y) * sum(g), where a masked entry (y = -inf) has exp(y) exactly 0 as in forward.
template <typename A>
__device__ __forceinline__ A softmax_grad_value(A g, A y, A sum, bool log) {
  return log ? g - exp_flushed(y) * sum : y * (g - sum);
}

template <typename D>
__global__ void __launch_bounds__(kBlockSize)
    softmax_backward_rows_kernel(D* out, const D* grad, const D* y, GradRows r, bool log) {
  using A = float_acc_of<D>;
  __shared__ A scratch[kBlockSize];
  const RowOffsets& ro = r.y_out;
  const int64_t n = ro.row_len;
  const int64_t sy = single_dim_stride(ro.in_elems);
  const int64_t so = single_dim_stride(ro.out_elems);
  const int64_t sg = single_dim_stride(r.grad_elems);
  const int64_t per_block = blockDim.y;
  // The loop bound is uniform over the block: group_reduce may synchronize it.
  for (int64_t base = blockIdx.x * per_block; base < ro.num_rows; base += gridDim.x * per_block) {
    const int64_t row = base + threadIdx.y;
    const bool active = row < ro.num_rows;
    const D* g = grad + (active ? fast_offset(r.grad_rows, row) : 0);
    const D* yr = y + (active ? fast_offset(ro.in_rows, row) : 0);
    A s = 0;
    if (active) {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const A gv = load_as<A>(g[j * sg]);
        s += log ? gv : gv * load_as<A>(yr[j * sy]);
      }
    }
    s = group_reduce(s, SumOp<A>{}, scratch);
    if (!active) continue;
    D* o = out + fast_offset(ro.out_rows, row);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      o[j * so] =
          store_as<D>(softmax_grad_value(load_as<A>(g[j * sg]), load_as<A>(yr[j * sy]), s, log));
    }
  }
}

template <typename D>
__global__ void softmax_backward_columns_kernel(D* out, const D* grad, const D* y, GradRows r,
                                                bool log) {
  using A = float_acc_of<D>;
  const RowOffsets& ro = r.y_out;
  const int64_t n = ro.row_len;
  const int64_t sy = ro.in_elems.strides[0];
  const int64_t so = ro.out_elems.strides[0];
  const int64_t sg = r.grad_elems.strides[0];
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < ro.num_rows;
       row += gridDim.x * int64_t{blockDim.x}) {
    const D* g = grad + fast_offset(r.grad_rows, row);
    const D* yr = y + fast_offset(ro.in_rows, row);
    A s = 0;
    for (int64_t j = 0; j < n; ++j) {
      const A gv = load_as<A>(g[j * sg]);
      s += log ? gv : gv * load_as<A>(yr[j * sy]);
    }
    D* o = out + fast_offset(ro.out_rows, row);
    for (int64_t j = 0; j < n; ++j) {
      o[j * so] =
          store_as<D>(softmax_grad_value(load_as<A>(g[j * sg]), load_as<A>(yr[j * sy]), s, log));
    }
  }
}

// ---- cross_entropy_backward: a group of threads per row of [N, C] ----

template <typename D>
struct CrossEntropyArgs {
  using A = float_acc_of<D>;
  const D* logits = nullptr;
  const int64_t* target = nullptr;
  const D* grad = nullptr;
  D* out = nullptr;
  int64_t rows = 0;
  int64_t c = 0;
  bool grad_per_row = false;
  double scale = 1;
  int64_t ignore_index = 0;
  A smooth = 0;  // label_smoothing / C, subtracted everywhere
  A hit = 0;     // 1 - label_smoothing, subtracted at the target class
};

template <typename D>
__global__ void __launch_bounds__(kBlockSize)
    cross_entropy_backward_rows_kernel(CrossEntropyArgs<D> a) {
  using A = float_acc_of<D>;
  __shared__ A scratch[kBlockSize];
  const int64_t c = a.c;
  const int64_t per_block = blockDim.y;
  // The loop bound is uniform over the block: group_reduce may synchronize it.
  for (int64_t base = blockIdx.x * per_block; base < a.rows; base += gridDim.x * per_block) {
    const int64_t row = base + threadIdx.y;
    const bool active = row < a.rows;
    const int64_t t = active ? a.target[row] : a.ignore_index;
    const bool counted = t != a.ignore_index;
    const D* x = a.logits + (active ? row * c : 0);
    Online<A> acc;
    if (counted) {
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) acc.add(load_as<A>(x[j]));
    }
    const A max = group_reduce(acc.m, MaxOp<A>{}, scratch);
    const A sum = group_reduce(acc.sum_at(max), SumOp<A>{}, scratch);
    if (!active) continue;
    D* o = a.out + row * c;
    if (!counted) {
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) o[j] = store_as<D>(A(0));
      continue;
    }
    // The coefficient in double, as the CPU twin, then in the math type.
    const auto coef = static_cast<A>(load_as<double>(a.grad[a.grad_per_row ? row : 0]) * a.scale);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      A v = (exp_flushed(load_as<A>(x[j]) - max) / sum - a.smooth) * coef;
      if (j == t) v -= a.hit * coef;
      o[j] = store_as<D>(v);
    }
  }
}

int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

// Whether another dim of a row operand is faster than the reduced one: then one thread per row
// reads neighbouring rows together (see the file comment).
bool columns_layout(const RowOffsets& r) {
  return r.in_elems.ndim == 1 && r.in_rows.ndim > 0 &&
         abs64(r.in_rows.strides[0]) < abs64(r.in_elems.strides[0]);
}

// Blocks of dim3(group_size(row_len), kBlockSize / group_size) for the group-per-row kernels.
unsigned row_group_blocks(int64_t num_rows, unsigned group) {
  const unsigned per_block = kBlockSize / group;
  const int64_t blocks = (num_rows + per_block - 1) / per_block;
  return static_cast<unsigned>(std::min<int64_t>(blocks, 65535 * 8));
}

}  // namespace

void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  const char* op = log ? "log_softmax" : "softmax";
  const DeviceGuard guard(in.device());
  const RowOffsets r = row_offsets(in.transpose(dim, -1), out.transpose(dim, -1), 1, op);
  const cudaStream_t stream = current_cuda_stream();
  const bool columns = columns_layout(r);
  visit_dtype(in.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      const D* x = device_ptr<const D>(in);
      D* y = device_ptr<D>(out);
      if (columns) {
        softmax_columns_kernel<<<grid_for(r.num_rows), kBlockSize, 0, stream>>>(x, y, r, log);
      } else {
        const unsigned g = group_size(r.row_len);
        softmax_rows_kernel<<<row_group_blocks(r.num_rows, g), dim3(g, kBlockSize / g), 0,
                              stream>>>(x, y, r, log);
      }
      TS_CUDA_CHECK_LAUNCH(op);
    } else {
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ", in.dtype());
    }
  });
}

void softmax_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& y, int64_t dim,
                             bool log) {
  if (out.numel() == 0) return;
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  const DeviceGuard guard(y.device());
  const Tensor out_t = out.transpose(dim, -1);
  GradRows r;
  r.y_out = row_offsets(y.transpose(dim, -1), out_t, 1, op);
  const RowOffsets rg = row_offsets(grad.transpose(dim, -1), out_t, 1, op);
  r.grad_rows = rg.in_rows;
  r.grad_elems = rg.in_elems;
  const cudaStream_t stream = current_cuda_stream();
  // The layout of y (the forward's output) picks the kernel, as the forward's input does.
  const bool columns = columns_layout(r.y_out);
  visit_dtype(y.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      D* o = device_ptr<D>(out);
      const D* g = device_ptr<const D>(grad);
      const D* yp = device_ptr<const D>(y);
      if (columns) {
        softmax_backward_columns_kernel<<<grid_for(r.y_out.num_rows), kBlockSize, 0, stream>>>(
            o, g, yp, r, log);
      } else {
        const unsigned gs = group_size(r.y_out.row_len);
        softmax_backward_rows_kernel<<<row_group_blocks(r.y_out.num_rows, gs),
                                       dim3(gs, kBlockSize / gs), 0, stream>>>(o, g, yp, r, log);
      }
      TS_CUDA_CHECK_LAUNCH(op);
    } else {
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ", y.dtype());
    }
  });
}

void cross_entropy_backward_kernel(const Tensor& out, const Tensor& logits, const Tensor& target,
                                   const Tensor& grad, double scale, int64_t ignore_index,
                                   double label_smoothing) {
  if (out.numel() == 0) return;
  const char* op = "cross_entropy_backward";
  const DeviceGuard guard(logits.device());
  const cudaStream_t stream = current_cuda_stream();
  const int64_t c = logits.size(1);
  visit_dtype(logits.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      using A = float_acc_of<D>;
      CrossEntropyArgs<D> a;
      a.logits = device_ptr<const D>(logits);
      a.target = device_ptr<const int64_t>(target);
      a.grad = device_ptr<const D>(grad);
      a.out = device_ptr<D>(out);
      a.rows = logits.size(0);
      a.c = c;
      a.grad_per_row = grad.dim() > 0;
      a.scale = scale;
      a.ignore_index = ignore_index;
      a.smooth = static_cast<A>(label_smoothing / static_cast<double>(c));
      a.hit = static_cast<A>(1.0 - label_smoothing);
      const unsigned g = group_size(c);
      cross_entropy_backward_rows_kernel<<<row_group_blocks(a.rows, g), dim3(g, kBlockSize / g), 0,
                                           stream>>>(a);
      TS_CUDA_CHECK_LAUNCH(op);
    } else {
      TS_INTERNAL_ASSERT(false, "[", op, "] kernel called with non-floating dtype ",
                         logits.dtype());
    }
  });
}

}  // namespace tessera::cuda
