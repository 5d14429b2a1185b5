// Built when TESSERA_CUDA is OFF or no toolkit was found: no CUDA devices. Every runtime/cuda.h
// function that needs a device raises DeviceError saying what the build lacks; the statistics
// read as zeros and the process-wide settings still work.

#include <atomic>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/cuda/cuda_allocator.h"
#include "tessera/runtime/device.h"
#include "tessera/runtime/error.h"

namespace tessera {

int cuda_device_count() { return 0; }

namespace cuda {
namespace {

[[noreturn]] void throw_no_cuda(const char* fn) {
  throw DeviceError(::tessera::detail::concat_message(
      "[cuda.", fn,
      "] this build of Tessera has no CUDA support (configure with TESSERA_CUDA=ON and the CUDA "
      "toolkit)"));
}

std::atomic<bool> g_matmul_allow_tf32{false};

}  // namespace

int current_device() { throw_no_cuda("current_device"); }
void set_device(int) { throw_no_cuda("set_device"); }

// As in CUDA builds, guarding a CPU device is a no-op.
DeviceGuard::DeviceGuard(Device device) {
  if (device.is_cuda()) throw_no_cuda("DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;

Stream Stream::create(Device, bool) { throw_no_cuda("Stream.create"); }
void Stream::synchronize() const { throw_no_cuda("Stream.synchronize"); }
bool Stream::query() const { throw_no_cuda("Stream.query"); }
void Stream::wait(const Event&) const { throw_no_cuda("Stream.wait"); }

Stream current_stream(int) { throw_no_cuda("current_stream"); }
void set_current_stream(const Stream&) { throw_no_cuda("set_current_stream"); }

StreamGuard::StreamGuard(const Stream& stream)
    : previous_stream_(stream), device_guard_(Device::cpu()) {
  throw_no_cuda("StreamGuard");
}
StreamGuard::~StreamGuard() = default;

// No event is ever created here, so there is no handle to destroy.
Event::~Event() = default;
Event::Event(Event&& other) noexcept
    : enable_timing_(other.enable_timing_), device_(other.device_), handle_(other.handle_) {}
Event& Event::operator=(Event&& other) noexcept {
  enable_timing_ = other.enable_timing_;
  device_ = other.device_;
  handle_ = other.handle_;
  return *this;
}
void Event::record() { throw_no_cuda("Event.record"); }
void Event::record(const Stream&) { throw_no_cuda("Event.record"); }
void Event::synchronize() const { throw_no_cuda("Event.synchronize"); }
bool Event::query() const { throw_no_cuda("Event.query"); }
float Event::elapsed_ms(const Event&) const { throw_no_cuda("Event.elapsed_ms"); }

void synchronize(int) { throw_no_cuda("synchronize"); }

MemoryStats memory_stats(int) { return MemoryStats{}; }
void reset_peak_memory_stats(int) {}
void empty_cache() {}

void set_matmul_allow_tf32(bool allow) {
  g_matmul_allow_tf32.store(allow, std::memory_order_relaxed);
}
bool matmul_allow_tf32() { return g_matmul_allow_tf32.load(std::memory_order_relaxed); }

CudaBlock cuda_alloc(size_t, int device) {
  throw DeviceError(
      ::tessera::detail::concat_message("[empty] cannot allocate on ", Device::cuda(device),
                                        ": this build of Tessera has no CUDA support"));
}
void cuda_free(const CudaBlock&) noexcept {}

}  // namespace cuda
}  // namespace tessera
