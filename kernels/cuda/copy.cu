// CUDA copy (any dtypes, any strides, across host and devices), fill and arange.
//
// Note [CUDA copy paths]
// Tensor::copy_ sends here every copy with a CUDA side. Bytes cross between host and device, or
// between devices, only as one contiguous block in the source dtype:
//   device -> same device: cudaMemcpyAsync for contiguous same-dtype data, else one converting
//     kernel (16-byte vectors when both sides are contiguous, OffsetCalc addressing otherwise);
//   host -> device: the source made contiguous on the CPU (CPU copy kernel), cudaMemcpyAsync into
//     dst, or into a contiguous device buffer that a converting kernel scatters into dst;
//   device -> host: the reverse (gather on the device, transfer, CPU copy kernel into dst);
//   device -> other device: contiguous source, cudaMemcpyPeerAsync, scatter on the destination.
// Host transfers synchronize the stream before returning: the host buffer may be pageable and
// the caller expects the data ready (a D2H result is read at once; an H2D source may be freed).

#include <type_traits>

#include "tessera/kernels/cuda/cuda_kernels.h"
#include "tessera/kernels/cuda/device_cast.cuh"
#include "tessera/kernels/cuda/elementwise.cuh"
#include "tessera/runtime/cuda.h"

namespace tessera::cuda {

namespace {

// dst = convert(src), vectorized when both are contiguous (Note [CUDA elementwise loops]).
template <typename To, typename From>
struct ConvertFn {
  static constexpr int kVec = kVecOf<To> < kVecOf<From> ? kVecOf<To> : kVecOf<From>;
  To* dst;
  const From* src;

  template <int V>
  __device__ void vec(int64_t i) const {
    const Vec<From, V> x = load_vec<From, V>(src + i);
    Vec<To, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = convert<To>(x.v[j]);
    store_vec<To, V>(dst + i, r);
  }
  __device__ void at(const int64_t* off) const { dst[off[0]] = convert<To>(src[off[1]]); }
};

void* bytes_of(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) +
         t.storage_offset() * static_cast<int64_t>(t.element_size());
}

// Same-device copy: both tensors on one CUDA device.
void copy_on_device(const Tensor& dst, const Tensor& src) {
  DeviceGuard guard(dst.device());
  const cudaStream_t stream = current_cuda_stream();
  if (dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype()) {
    if (bytes_of(dst) == bytes_of(src)) return;
    TS_CUDA_CHECK("copy_", cudaMemcpyAsync(bytes_of(dst), bytes_of(src), dst.nbytes(),
                                           cudaMemcpyDeviceToDevice, stream));
    return;
  }
  visit_dtype(dst.dtype(), [&](auto dst_tag) {
    using To = decltype(dst_tag);
    visit_dtype(src.dtype(), [&](auto src_tag) {
      using From = decltype(src_tag);
      launch_elementwise<2>("copy_", {&dst, &src},
                            ConvertFn<To, From>{device_ptr<To>(dst), device_ptr<const From>(src)});
    });
  });
}

// A contiguous tensor of t's shape and dtype on `device` holding t's values (t itself if it is
// already contiguous there).
Tensor contiguous_on(const Tensor& t, Device device) {
  if (t.is_contiguous() && t.device() == device) return t;
  Tensor out = Tensor::make_empty(t.sizes(), t.dtype(), device);
  if (device.is_cpu()) {
    kernels(DeviceType::CPU, "copy_").copy(out, t);
  } else {
    copy_on_device(out, t);
  }
  return out;
}

// Host -> device: see Note [CUDA copy paths].
void copy_to_device(const Tensor& dst, const Tensor& src) {
  const Tensor host = contiguous_on(src, Device::cpu());
  DeviceGuard guard(dst.device());
  const cudaStream_t stream = current_cuda_stream();
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor staged = direct ? dst : Tensor::make_empty(src.sizes(), src.dtype(), dst.device());
  TS_CUDA_CHECK("copy_", cudaMemcpyAsync(bytes_of(staged), bytes_of(host), host.nbytes(),
                                         cudaMemcpyHostToDevice, stream));
  if (!direct) copy_on_device(dst, staged);
  TS_CUDA_CHECK("copy_", cudaStreamSynchronize(stream));
}

// Device -> host: see Note [CUDA copy paths].
void copy_to_host(const Tensor& dst, const Tensor& src) {
  DeviceGuard guard(src.device());
  const cudaStream_t stream = current_cuda_stream();
  const Tensor gathered = contiguous_on(src, src.device());
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor host = direct ? dst : Tensor::make_empty(src.sizes(), src.dtype(), Device::cpu());
  TS_CUDA_CHECK("copy_", cudaMemcpyAsync(bytes_of(host), bytes_of(gathered), gathered.nbytes(),
                                         cudaMemcpyDeviceToHost, stream));
  TS_CUDA_CHECK("copy_", cudaStreamSynchronize(stream));
  if (!direct) kernels(DeviceType::CPU, "copy_").copy(dst, host);
}

// Device -> another device. The transfer runs on the destination's current stream after the
// source's pending work; the source stream then waits for the transfer, so that memory it frees
// (the staging buffer) is not reused before the transfer has read it.
void copy_between_devices(const Tensor& dst, const Tensor& src) {
  const Tensor packed = contiguous_on(src, src.device());
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor staged = direct ? dst : Tensor::make_empty(src.sizes(), src.dtype(), dst.device());
  const Stream src_stream = current_stream(src.device().index());
  const Stream dst_stream = current_stream(dst.device().index());
  Event src_ready;
  src_ready.record(src_stream);
  dst_stream.wait(src_ready);
  {
    DeviceGuard guard(dst.device());
    TS_CUDA_CHECK("copy_",
                  cudaMemcpyPeerAsync(bytes_of(staged), dst.device().index(), bytes_of(packed),
                                      src.device().index(), packed.nbytes(),
                                      static_cast<cudaStream_t>(dst_stream.handle())));
  }
  if (!direct) copy_on_device(dst, staged);
  Event copied;
  copied.record(dst_stream);
  src_stream.wait(copied);
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu()) {
    copy_to_host(dst, src);
  } else if (src.device().is_cpu()) {
    copy_to_device(dst, src);
  } else if (dst.device() == src.device()) {
    copy_on_device(dst, src);
  } else {
    copy_between_devices(dst, src);
  }
}

template <typename T>
struct FillFn {
  static constexpr int kVec = kVecOf<T>;
  T* dst;
  T value;

  template <int V>
  __device__ void vec(int64_t i) const {
    Vec<T, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = value;
    store_vec<T, V>(dst + i, r);
  }
  __device__ void at(const int64_t* off) const { dst[off[0]] = value; }
};

void fill_kernel(const Tensor& dst, const Scalar& value) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // The value is converted on the host, exactly as the CPU kernel converts it.
    launch_elementwise<1>("fill_", {&dst}, FillFn<T>{device_ptr<T>(dst), value.to<T>()});
  });
}

// out[i] = start + i * step as the CPU kernel computes it: integers in int64 arithmetic, floating
// types in double rounded to Compute<T> (float for the reduced types) and then to T. The
// explicit _rn operations keep nvcc from fusing them into an FMA, which would round differently.
template <typename T>
__global__ void __launch_bounds__(kBlockSize)
    arange_kernel_typed(int64_t n, T* out, double start, double step) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if constexpr (std::is_integral_v<T>) {
      const auto s = static_cast<int64_t>(start), d = static_cast<int64_t>(step);
      out[i] = from_int64<T>(static_cast<int64_t>(
          static_cast<uint64_t>(s) + static_cast<uint64_t>(i) * static_cast<uint64_t>(d)));
    } else {
      const double v = __dadd_rn(start, __dmul_rn(static_cast<double>(i), step));
      if constexpr (std::is_same_v<T, double>) {
        out[i] = v;
      } else {
        out[i] = from_float<T>(static_cast<float>(v));
      }
    }
  }
}

void arange_kernel(const Tensor& out, double start, double step) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_cuda_stream();
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    arange_kernel_typed<T>
        <<<grid_for(n), kBlockSize, 0, stream>>>(n, device_ptr<T>(out), start, step);
  });
  TS_CUDA_CHECK_LAUNCH("arange");
}

}  // namespace

void register_copy_kernels(KernelTable& table) {
  table.copy = copy_kernel;
  table.fill = fill_kernel;
  table.arange = arange_kernel;
}

}  // namespace tessera::cuda
