// The CUDA caching allocator and its statistics. See Note [CUDA caching allocator] in
// runtime/cuda/cuda_allocator.h.

#include "tessera/runtime/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/cuda/device_index.h"
#include "tessera/runtime/error.h"

namespace tessera::cuda {
namespace {

constexpr size_t kSmallLimit = size_t{1} << 20;
constexpr size_t kSmallGranularity = 512;
constexpr size_t kLargeGranularity = size_t{2} << 20;
// No device holds this much: larger requests are refused unrounded (rounding could overflow).
constexpr size_t kMaxRequest = size_t{1} << 60;

size_t size_class(size_t nbytes) {
  const size_t granularity = nbytes < kSmallLimit ? kSmallGranularity : kLargeGranularity;
  return (nbytes + granularity - 1) / granularity * granularity;
}

struct FreeListKey {
  void* stream;
  size_t capacity;
  bool operator==(const FreeListKey&) const = default;
};

struct FreeListKeyHash {
  size_t operator()(const FreeListKey& key) const noexcept {
    return std::hash<void*>()(key.stream) ^ (key.capacity * 0x9e3779b97f4a7c15ULL);
  }
};

struct DeviceAllocator {
  std::mutex mu;
  MemoryStats stats;  // guarded by mu, as is everything below
  std::unordered_map<FreeListKey, std::vector<void*>, FreeListKeyHash> free_lists;
};

// Never destroyed: see the Note. Only called with an index checked against device_count().
DeviceAllocator& allocator_of(int device) {
  static DeviceAllocator* const allocators =
      new DeviceAllocator[static_cast<size_t>(std::max(detail::device_count(), 1))];
  return allocators[device];
}

// cudaFree's every cached block of `device`; the caller holds the device's mutex.
void release_cached(DeviceAllocator& a, int device) {
  if (a.stats.cached_bytes == 0) return;
  DeviceGuard guard(Device::cuda(device));
  // A cached block may still be read by kernels queued before it was freed.
  TS_CUDA_CHECK("cuda.empty_cache", cudaDeviceSynchronize());
  for (auto it = a.free_lists.begin(); it != a.free_lists.end(); it = a.free_lists.erase(it)) {
    std::vector<void*>& blocks = it->second;
    while (!blocks.empty()) {
      void* ptr = blocks.back();
      blocks.pop_back();
      a.stats.cached_bytes -= static_cast<int64_t>(it->first.capacity);
      TS_CUDA_CHECK("cuda.empty_cache", cudaFree(ptr));
    }
  }
}

[[noreturn]] void throw_out_of_memory(const DeviceAllocator& a, int device, size_t nbytes,
                                      size_t capacity, const char* cause) {
  std::string free_memory;
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    free_memory = ::tessera::detail::concat_message("; the device has ", free_bytes, " of ",
                                                    total_bytes, " bytes free");
  } else {
    cudaGetLastError();
  }
  throw OutOfMemoryError(::tessera::detail::concat_message(
      "[cuda_alloc] out of memory on ", Device::cuda(device), ": cannot allocate ", nbytes,
      " bytes (", capacity, " with rounding); Tessera holds ", a.stats.current_bytes,
      " bytes in use and ", a.stats.cached_bytes, " bytes cached", cause, free_memory));
}

// cudaMalloc with one retry after emptying the device's cache; the caller holds the mutex.
void* device_malloc(DeviceAllocator& a, int device, size_t nbytes, size_t capacity) {
  DeviceGuard guard(Device::cuda(device));
  if (nbytes > kMaxRequest) throw_out_of_memory(a, device, nbytes, capacity, "");
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, capacity);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // handled here: keep it from surfacing at the next launch check
    release_cached(a, device);
    status = cudaMalloc(&ptr, capacity);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      throw_out_of_memory(a, device, nbytes, capacity, " (after emptying the cache and retrying)");
    }
  }
  if (status != cudaSuccess) {
    detail::throw_cuda_error(status, "cuda_alloc", "cudaMalloc(ptr, bytes)");
  }
  ++a.stats.num_device_mallocs;
  return ptr;
}

}  // namespace

CudaBlock cuda_alloc(size_t nbytes, int device) {
  const int count = detail::device_count();
  TS_CHECK_T(DeviceError, device >= 0 && device < count, "[empty] device ", Device::cuda(device),
             " is not available: this machine has ", count, " CUDA devices");
  void* const stream = current_stream(device).handle();
  if (nbytes == 0) return CudaBlock{nullptr, 0, stream, device};
  DeviceAllocator& a = allocator_of(device);
  std::lock_guard<std::mutex> lock(a.mu);
  // An oversized request keeps its size: no cached block matches it and device_malloc refuses it.
  const size_t capacity = nbytes > kMaxRequest ? nbytes : size_class(nbytes);
  void* ptr = nullptr;
  auto it = a.free_lists.find(FreeListKey{stream, capacity});
  if (it != a.free_lists.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    a.stats.cached_bytes -= static_cast<int64_t>(capacity);
    ++a.stats.num_cache_hits;
  } else {
    ptr = device_malloc(a, device, nbytes, capacity);
  }
  ++a.stats.num_allocs;
  a.stats.current_bytes += static_cast<int64_t>(capacity);
  a.stats.peak_bytes = std::max(a.stats.peak_bytes, a.stats.current_bytes);
  return CudaBlock{ptr, capacity, stream, device};
}

void cuda_free(const CudaBlock& block) noexcept {
  if (block.ptr == nullptr) return;
  DeviceAllocator& a = allocator_of(block.device);
  std::lock_guard<std::mutex> lock(a.mu);
  a.stats.current_bytes -= static_cast<int64_t>(block.capacity);
  try {
    a.free_lists[FreeListKey{block.stream, block.capacity}].push_back(block.ptr);
    a.stats.cached_bytes += static_cast<int64_t>(block.capacity);
  } catch (...) {  // no host memory to grow the free list: give the block back instead
    int previous = -1;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(block.device) == cudaSuccess) {
      static_cast<void>(cudaFree(block.ptr));
      static_cast<void>(cudaSetDevice(previous));
    }
  }
}

MemoryStats memory_stats(int device_index) {
  const int device = detail::resolve_device_index(device_index, "cuda.memory_stats");
  DeviceAllocator& a = allocator_of(device);
  std::lock_guard<std::mutex> lock(a.mu);
  return a.stats;
}

void reset_peak_memory_stats(int device_index) {
  const int device = detail::resolve_device_index(device_index, "cuda.reset_peak_memory_stats");
  DeviceAllocator& a = allocator_of(device);
  std::lock_guard<std::mutex> lock(a.mu);
  a.stats.peak_bytes = a.stats.current_bytes;
}

void empty_cache() {
  for (int device = 0; device < detail::device_count(); ++device) {
    DeviceAllocator& a = allocator_of(device);
    std::lock_guard<std::mutex> lock(a.mu);
    release_cached(a, device);
  }
}

}  // namespace tessera::cuda
