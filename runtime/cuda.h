#pragma once
// The CUDA runtime surface: current device, streams and events, synchronization and the caching
// allocator's statistics. The header needs no CUDA toolkit: stream and event handles are opaque
// here (a cudaStream_t / cudaEvent_t behind void*). In a build without CUDA every function that
// would touch a device raises DeviceError naming what the build lacks (runtime/no_cuda.cpp).
//
// Note [Current stream]
// Each thread has a current stream per device, initially the device's default (legacy) stream.
// Kernels and copies issued by that thread run on it; set_current_stream / StreamGuard change it.
// Work on one stream is ordered; across streams order it with Event::record + Stream::wait.

#include <cstdint>

#include "tessera/runtime/device.h"

namespace tessera::cuda {

// The calling thread's current CUDA device index (cudaGetDevice) and cudaSetDevice.
int current_device();
void set_device(int index);

// Makes `device` current for the guard's lifetime and restores the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class Event;

// A CUDA stream on one device. Copies share the handle; Stream::create makes a new stream that
// lives as long as the process (streams are few and reused, as in PyTorch's pool).
class Stream {
 public:
  // The default (legacy, null) stream of `device`.
  explicit Stream(Device device = Device::cuda(0)) : device_(device) {}
  static Stream create(Device device, bool high_priority = false);

  Device device() const { return device_; }
  void* handle() const { return handle_; }  // cudaStream_t
  // Blocks the host until all work queued on the stream is done.
  void synchronize() const;
  // True when all work queued on the stream is done.
  bool query() const;
  // Work queued on this stream after this call waits for `event`.
  void wait(const Event& event) const;

  bool operator==(const Stream& other) const = default;

 private:
  Stream(Device device, void* handle) : device_(device), handle_(handle) {}
  Device device_;
  void* handle_ = nullptr;
};

// The calling thread's current stream on `device` (see Note [Current stream]); index -1 means
// the current device.
Stream current_stream(int device_index = -1);
void set_current_stream(const Stream& stream);

// Makes `stream` (and its device) current for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_stream_;
  DeviceGuard device_guard_;
};

// A CUDA event (created lazily on first record). Timing is enabled when `enable_timing`.
class Event {
 public:
  explicit Event(bool enable_timing = false) : enable_timing_(enable_timing) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;

  // Records the event at the current tail of `stream` (default: the current stream).
  void record();
  void record(const Stream& stream);
  void synchronize() const;
  bool query() const;  // true when the recorded work has completed (or nothing was recorded)
  // Milliseconds between this event and `end`, both recorded and completed, timing enabled.
  float elapsed_ms(const Event& end) const;

  void* handle() const { return handle_; }  // cudaEvent_t, null until recorded
  Device device() const { return device_; }

 private:
  bool enable_timing_;
  Device device_ = Device::cuda(0);
  void* handle_ = nullptr;
};

// Blocks until every stream of `device_index` (-1: current device) has finished its work.
void synchronize(int device_index = -1);

// Caching allocator statistics of one device (bytes of block capacity), as in
// torch.cuda.memory_stats: current/peak allocated, bytes held in the cache, calls and hits.
struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t cached_bytes = 0;
  int64_t num_allocs = 0;
  int64_t num_cache_hits = 0;
  int64_t num_device_mallocs = 0;  // cudaMalloc calls made
};
MemoryStats memory_stats(int device_index = -1);
void reset_peak_memory_stats(int device_index = -1);
// Returns every cached (unused) block of every device to the driver (cudaFree).
void empty_cache();

// Whether float32 matmuls on CUDA may use TF32 tensor cores (default false: full float32, as
// torch.backends.cuda.matmul.allow_tf32). Process-wide.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

}  // namespace tessera::cuda
