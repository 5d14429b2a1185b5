// Streams and the per-thread current stream (runtime/cuda.h, Note [Current stream]).

#include <cuda_runtime_api.h>

#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/cuda/device_index.h"
#include "tessera/runtime/error.h"

namespace tessera::cuda {
namespace {

// The calling thread's current stream of each device, initially its legacy default stream.
std::vector<Stream>& thread_current_streams() {
  thread_local std::vector<Stream> streams = [] {
    std::vector<Stream> v;
    v.reserve(static_cast<size_t>(detail::device_count()));
    for (int d = 0; d < detail::device_count(); ++d) v.emplace_back(Device::cuda(d));
    return v;
  }();
  return streams;
}

cudaStream_t raw(const Stream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

}  // namespace

Stream Stream::create(Device device, bool high_priority) {
  TS_CHECK_T(DeviceError, device.is_cuda(), "[cuda.Stream.create] needs a CUDA device, got ",
             device);
  DeviceGuard guard(device);
  int least = 0;
  int greatest = 0;
  TS_CUDA_CHECK("cuda.Stream.create", cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t stream = nullptr;
  // Non-blocking: a created stream does not serialize with the legacy default stream. Never
  // destroyed, so a handle stays valid in every copy and in the caching allocator's free lists.
  TS_CUDA_CHECK("cuda.Stream.create",
                cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                             high_priority ? greatest : least));
  return Stream(device, stream);
}

// The null handle means the legacy stream of the *current* device, hence the guards below.
void Stream::synchronize() const {
  DeviceGuard guard(device_);
  TS_CUDA_CHECK("cuda.Stream.synchronize", cudaStreamSynchronize(raw(*this)));
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  const cudaError_t status = cudaStreamQuery(raw(*this));
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error for the next check to find
    return false;
  }
  detail::throw_cuda_error(status, "cuda.Stream.query", "cudaStreamQuery(stream)");
}

void Stream::wait(const Event& event) const {
  if (event.handle() == nullptr) return;  // nothing recorded: nothing to wait for
  DeviceGuard guard(device_);
  TS_CUDA_CHECK("cuda.Stream.wait",
                cudaStreamWaitEvent(raw(*this), static_cast<cudaEvent_t>(event.handle()), 0));
}

Stream current_stream(int device_index) {
  const int index = detail::resolve_device_index(device_index, "cuda.current_stream");
  return thread_current_streams()[static_cast<size_t>(index)];
}

void set_current_stream(const Stream& stream) {
  TS_CHECK_T(DeviceError, stream.device().is_cuda(),
             "[cuda.set_current_stream] needs a stream of a CUDA device, got one of ",
             stream.device());
  detail::check_device_index(stream.device().index(), "cuda.set_current_stream");
  thread_current_streams()[static_cast<size_t>(stream.device().index())] = stream;
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_stream_(current_stream(stream.device().index())), device_guard_(stream.device()) {
  set_current_stream(stream);
}

// The index was checked by the constructor and the vector never grows: assignment cannot throw.
StreamGuard::~StreamGuard() {
  thread_current_streams()[static_cast<size_t>(previous_stream_.device().index())] =
      previous_stream_;
}

}  // namespace tessera::cuda
