// embedding, its backward scatter-add and the per-sample nll_loss on CUDA (twins of
// kernels/cpu/nn.cpp), the row addressing of Note [CUDA row kernels], and the registration of
// the nn family (softmax and cross_entropy's backward in softmax.cu, the norms in norm.cu).
//
// Note [Deterministic embedding backward]
// out[indices[i]] += grad[i] with repeated indices could use float atomics, but their order
// varies run to run, and so would the bits. Instead the (index, position) pairs are sorted by
// index with CUB's radix sort, which is stable: equal indices keep their positions in order.
// Then one block per run of equal indices adds the run's grad rows into its output row in
// position order, threads over the columns. That is the CPU twin's order exactly, so float32 and
// float64 results are bitwise equal to the CPU's and reproducible. The price is the sort (cheap
// next to the rows) and a run being summed by one block: an index repeated r times costs r
// sequential row reads for its block, while other blocks work on other indices.

#include <algorithm>
#include <array>
#include <cub/device/device_radix_sort.cuh>
#include <vector>

#include "tessera/kernels/cuda/block_reduce.cuh"
#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/nn_kernels.h"

namespace tessera::cuda {

namespace {

// ---- row addressing ----

// Dims [begin, end) of a and b (equal sizes) as one OffsetCalc each, collapsed where both are
// contiguous across a pair of dims, size-1 dims dropped.
std::array<OffsetCalc, 2> collapse_pair(const Tensor& a, const Tensor& b, int64_t begin,
                                        int64_t end, const char* op) {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, 2> strides;
  for (int64_t d = begin; d < end; ++d) {
    const int64_t size = a.size(d);
    if (size == 1) continue;
    if (!sizes.empty() && strides[0].back() == a.stride(d) * size &&
        strides[1].back() == b.stride(d) * size) {
      sizes.back() *= size;
      strides[0].back() = a.stride(d);
      strides[1].back() = b.stride(d);
    } else {
      sizes.push_back(size);
      strides[0].push_back(a.stride(d));
      strides[1].push_back(b.stride(d));
    }
  }
  const int nd = static_cast<int>(sizes.size());
  TS_CHECK_T(NotSupportedError, nd <= kMaxDims, "[", op, "] CUDA kernels address at most ",
             kMaxDims, " non-mergeable dims, got ", nd,
             "; make the tensor contiguous (.contiguous()) first");
  std::array<OffsetCalc, 2> calc;
  for (size_t k = 0; k < 2; ++k) {
    calc[k].ndim = nd;
    for (int d = 0; d < nd; ++d) {
      calc[k].sizes[d] = sizes[static_cast<size_t>(nd - 1 - d)];
      calc[k].strides[d] = strides[k][static_cast<size_t>(nd - 1 - d)];
    }
  }
  return calc;
}

// ---- embedding: rows copied in units of U (1 to 16 bytes) ----

template <typename U, typename I>
__global__ void embedding_kernel(U* out, const U* weight, const I* indices, int64_t n, int64_t d,
                                 int64_t w_row, int64_t w_col, int64_t o_row, int64_t o_col) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const U* src = weight + static_cast<int64_t>(indices[i]) * w_row;
    U* dst = out + i * o_row;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dst[j * o_col] = src[j * w_col];
  }
}

template <typename U>
void launch_embedding(const Tensor& out, const Tensor& weight, const Tensor& indices,
                      int64_t unit) {
  const auto es = static_cast<int64_t>(weight.element_size());
  const int64_t per = unit / es;  // elements per unit (> 1 only for contiguous rows)
  const int64_t n = indices.numel();
  const int64_t d = weight.size(1) / per;
  U* o = reinterpret_cast<U*>(byte_ptr(out));
  const U* w = reinterpret_cast<const U*>(byte_ptr(weight));
  const auto threads = static_cast<unsigned>(std::clamp<int64_t>((d + 31) / 32 * 32, 32, 256));
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(n, 65535 * 8));
  const cudaStream_t stream = current_cuda_stream();
  const int64_t w_row = weight.stride(0) / per;
  const int64_t w_col = weight.stride(1);
  const int64_t o_row = out.stride(0) / per;
  const int64_t o_col = out.stride(1);
  if (indices.dtype() == kInt32) {
    embedding_kernel<<<blocks, threads, 0, stream>>>(o, w, device_ptr<const int32_t>(indices), n, d,
                                                     w_row, w_col, o_row, o_col);
  } else {
    embedding_kernel<<<blocks, threads, 0, stream>>>(o, w, device_ptr<const int64_t>(indices), n, d,
                                                     w_row, w_col, o_row, o_col);
  }
  TS_CUDA_CHECK_LAUNCH("embedding");
}

// Rows are copied bytewise, so every dtype of weight works; contiguous, aligned rows move in
// units of up to 16 bytes.
void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t n = indices.numel();
  const int64_t d = weight.size(1);
  if (n == 0 || d == 0) return;
  const DeviceGuard guard(weight.device());
  TS_INTERNAL_ASSERT(indices.is_contiguous(), "[embedding] expected flattened indices");
  const auto es = static_cast<int64_t>(weight.element_size());
  int64_t unit = es;
  if (weight.stride(1) == 1 && out.stride(1) == 1) {
    const auto w_addr = reinterpret_cast<uintptr_t>(byte_ptr(weight));
    const auto o_addr = reinterpret_cast<uintptr_t>(byte_ptr(out));
    for (int64_t u = 16; u > es; u /= 2) {
      const bool fits = (d * es) % u == 0 && (weight.stride(0) * es) % u == 0 &&
                        (out.stride(0) * es) % u == 0 && w_addr % u == 0 && o_addr % u == 0;
      if (fits) {
        unit = u;
        break;
      }
    }
  }
  switch (unit) {
    case 1:
      return launch_embedding<uint8_t>(out, weight, indices, unit);
    case 2:
      return launch_embedding<uint16_t>(out, weight, indices, unit);
    case 4:
      return launch_embedding<uint32_t>(out, weight, indices, unit);
    case 8:
      return launch_embedding<uint2>(out, weight, indices, unit);
    default:
      return launch_embedding<uint4>(out, weight, indices, unit);
  }
}

// ---- embedding_backward (see Note [Deterministic embedding backward]) ----

__global__ void iota_kernel(int64_t* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += gridDim.x * int64_t{blockDim.x}) {
    p[i] = i;
  }
}

// One block per run of equal sorted keys (the first position of the run does the work).
template <typename G, typename A>
__global__ void embedding_backward_kernel(A* out, const G* grad, const uint64_t* keys,
                                          const int64_t* positions, int64_t n, int64_t d,
                                          int64_t g_row, int64_t g_col) {
  for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
    const uint64_t key = keys[p];
    if (p > 0 && keys[p - 1] == key) continue;
    int64_t end = p + 1;
    while (end < n && keys[end] == key) ++end;
    A* dst = out + static_cast<int64_t>(key) * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      A acc = dst[j];
#pragma unroll 4
      for (int64_t q = p; q < end; ++q) acc += load_as<A>(grad[positions[q] * g_row + j * g_col]);
      dst[j] = acc;
    }
  }
}

int end_bit_for(int64_t num_rows) {
  int bits = 1;
  while (bits < 64 && (int64_t{1} << bits) < num_rows) ++bits;
  return bits;
}

void embedding_backward(const Tensor& out, const Tensor& grad, const Tensor& indices) {
  const int64_t n = grad.size(0);
  const int64_t d = grad.size(1);
  if (n == 0 || d == 0) return;
  const DeviceGuard guard(grad.device());
  const Device dev = grad.device();
  const cudaStream_t stream = current_cuda_stream();
  // Indices are in [0, V) (validated by embedding), so sorting the low bits of their uint64 view
  // orders them.
  const Tensor keys_in = indices.to(kInt64).contiguous();
  const Tensor keys = Tensor::make_empty({n}, kInt64, dev);
  const Tensor order_in = Tensor::make_empty({n}, kInt64, dev);
  const Tensor order = Tensor::make_empty({n}, kInt64, dev);
  iota_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(device_ptr<int64_t>(order_in), n);
  TS_CUDA_CHECK_LAUNCH("embedding_backward");
  const auto* k_in = reinterpret_cast<const uint64_t*>(device_ptr<const int64_t>(keys_in));
  auto* k_out = reinterpret_cast<uint64_t*>(device_ptr<int64_t>(keys));
  const int end_bit = end_bit_for(out.size(0));
  size_t temp_bytes = 0;
  TS_CUDA_CHECK("embedding_backward",
                cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out,
                                                device_ptr<const int64_t>(order_in),
                                                device_ptr<int64_t>(order), n, 0, end_bit, stream));
  const Tensor temp =
      Tensor::make_empty({static_cast<int64_t>(std::max<size_t>(temp_bytes, 1))}, kUInt8, dev);
  TS_CUDA_CHECK("embedding_backward",
                cub::DeviceRadixSort::SortPairs(device_ptr<uint8_t>(temp), temp_bytes, k_in, k_out,
                                                device_ptr<const int64_t>(order_in),
                                                device_ptr<int64_t>(order), n, 0, end_bit, stream));
  const auto threads = static_cast<unsigned>(std::clamp<int64_t>((d + 31) / 32 * 32, 32, 256));
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(n, 65535 * 8));
  visit_dtype(grad.dtype(), [&](auto tag) {
    using G = decltype(tag);
    if constexpr (kIsDeviceFloat<G>) {
      using A = float_acc_of<G>;
      embedding_backward_kernel<<<blocks, threads, 0, stream>>>(
          device_ptr<A>(out), device_ptr<const G>(grad), k_out, device_ptr<const int64_t>(order), n,
          d, grad.stride(0), grad.stride(1));
      TS_CUDA_CHECK_LAUNCH("embedding_backward");
    } else {
      TS_INTERNAL_ASSERT(false, "[embedding_backward] kernel called with non-floating grad ",
                         grad.dtype());
    }
  });
}

// ---- nll_loss: a warp per sample ----

template <typename D>
__global__ void __launch_bounds__(kBlockSize)
    nll_loss_kernel(D* out, const D* logp, const int64_t* target, int64_t n, int64_t c,
                    int64_t l_row, int64_t l_col, int64_t t_stride, int64_t o_stride,
                    int64_t ignore_index, bool smoothing, float_acc_of<D> keep,
                    float_acc_of<D> smooth) {
  using A = float_acc_of<D>;
  __shared__ A scratch[kBlockSize];
  const int64_t per_block = blockDim.y;
  for (int64_t base = blockIdx.x * per_block; base < n; base += gridDim.x * per_block) {
    const int64_t i = base + threadIdx.y;
    const bool active = i < n;
    const int64_t t = active ? target[i * t_stride] : ignore_index;
    const D* row = logp + (active ? i * l_row : 0);
    A sum = 0;
    if (smoothing) {  // uniform over the block, as group_reduce needs
      if (t != ignore_index) {
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sum += load_as<A>(row[j * l_col]);
      }
      sum = group_reduce(sum, SumOp<A>{}, scratch);
    }
    if (!active || threadIdx.x != 0) continue;
    A loss = 0;
    if (t != ignore_index) {
      loss = -load_as<A>(row[t * l_col]);
      if (smoothing) loss = keep * loss - smooth * sum;
    }
    out[i * o_stride] = store_as<D>(loss);
  }
}

void nll_loss(const Tensor& out, const Tensor& logp, const Tensor& target, int64_t ignore_index,
              double label_smoothing) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const DeviceGuard guard(logp.device());
  const int64_t c = logp.size(1);
  const cudaStream_t stream = current_cuda_stream();
  constexpr unsigned kGroup = 32;
  const unsigned per_block = kBlockSize / kGroup;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((n + per_block - 1) / per_block, 65535 * 8));
  visit_dtype(logp.dtype(), [&](auto tag) {
    using D = decltype(tag);
    if constexpr (kIsDeviceFloat<D>) {
      using A = float_acc_of<D>;
      const auto keep = static_cast<A>(1.0 - label_smoothing);
      const A smooth = c > 0 ? static_cast<A>(label_smoothing / static_cast<double>(c)) : A(0);
      nll_loss_kernel<<<blocks, dim3(kGroup, per_block), 0, stream>>>(
          device_ptr<D>(out), device_ptr<const D>(logp), device_ptr<const int64_t>(target), n, c,
          logp.stride(0), logp.stride(1), target.stride(0), out.stride(0), ignore_index,
          label_smoothing > 0, keep, smooth);
      TS_CUDA_CHECK_LAUNCH("nll_loss");
    } else {
      TS_INTERNAL_ASSERT(false, "[nll_loss] kernel called with non-floating dtype ", logp.dtype());
    }
  });
}

}  // namespace

RowOffsets row_offsets(const Tensor& in, const Tensor& out, int64_t k, const char* op) {
  const int64_t lead = in.dim() - k;
  RowOffsets r;
  r.num_rows = 1;
  r.row_len = 1;
  for (int64_t d = 0; d < in.dim(); ++d) (d < lead ? r.num_rows : r.row_len) *= in.size(d);
  const auto rows = collapse_pair(in, out, 0, lead, op);
  const auto elems = collapse_pair(in, out, lead, in.dim(), op);
  r.in_rows = rows[0];
  r.out_rows = rows[1];
  r.in_elems = elems[0];
  r.out_elems = elems[1];
  return r;
}

void register_nn_kernels(KernelTable& table) {
  table.softmax = softmax_kernel;
  table.layer_norm = layer_norm_kernel;
  table.rms_norm = rms_norm_kernel;
  table.softmax_backward = softmax_backward_kernel;
  table.norm_backward = norm_backward_kernel;
  table.cross_entropy_backward = cross_entropy_backward_kernel;
  table.embedding = embedding;
  table.embedding_backward = embedding_backward;
  table.nll_loss = nll_loss;
}

}  // namespace tessera::cuda
