// CUDA events (runtime/cuda.h): created lazily on the device of the first stream recorded on.

#include <cuda_runtime_api.h>

#include <utility>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/error.h"

namespace tessera::cuda {
namespace {

cudaEvent_t raw(void* handle) { return static_cast<cudaEvent_t>(handle); }

}  // namespace

Event::~Event() {
  if (handle_ != nullptr) static_cast<void>(cudaEventDestroy(raw(handle_)));
}

Event::Event(Event&& other) noexcept
    : enable_timing_(other.enable_timing_),
      device_(other.device_),
      handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) static_cast<void>(cudaEventDestroy(raw(handle_)));
    enable_timing_ = other.enable_timing_;
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  TS_CHECK_T(DeviceError, handle_ == nullptr || stream.device() == device_,
             "[cuda.Event.record] the event belongs to ", device_,
             " and cannot be recorded on a stream of ", stream.device());
  DeviceGuard guard(stream.device());
  if (handle_ == nullptr) {
    cudaEvent_t event = nullptr;
    TS_CUDA_CHECK("cuda.Event.record",
                  cudaEventCreateWithFlags(
                      &event, enable_timing_ ? cudaEventDefault : cudaEventDisableTiming));
    handle_ = event;
    device_ = stream.device();
  }
  TS_CUDA_CHECK("cuda.Event.record",
                cudaEventRecord(raw(handle_), static_cast<cudaStream_t>(stream.handle())));
}

void Event::synchronize() const {
  if (handle_ == nullptr) return;
  TS_CUDA_CHECK("cuda.Event.synchronize", cudaEventSynchronize(raw(handle_)));
}

bool Event::query() const {
  if (handle_ == nullptr) return true;
  const cudaError_t status = cudaEventQuery(raw(handle_));
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error for the next check to find
    return false;
  }
  detail::throw_cuda_error(status, "cuda.Event.query", "cudaEventQuery(event)");
}

float Event::elapsed_ms(const Event& end) const {
  TS_CHECK_T(DeviceError, handle_ != nullptr && end.handle_ != nullptr,
             "[cuda.Event.elapsed_ms] both events must be recorded first (start ",
             handle_ != nullptr ? "recorded" : "not recorded", ", end ",
             end.handle_ != nullptr ? "recorded" : "not recorded", ")");
  TS_CHECK_T(DeviceError, enable_timing_ && end.enable_timing_,
             "[cuda.Event.elapsed_ms] both events must be created with enable_timing = true");
  TS_CHECK_T(DeviceError, device_ == end.device_,
             "[cuda.Event.elapsed_ms] the events are on different devices: ", device_, " and ",
             end.device_);
  DeviceGuard guard(device_);
  float ms = 0.0f;
  TS_CUDA_CHECK("cuda.Event.elapsed_ms", cudaEventElapsedTime(&ms, raw(handle_), raw(end.handle_)));
  return ms;
}

}  // namespace tessera::cuda
