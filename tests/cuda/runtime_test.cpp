// The CUDA runtime layer: devices, streams, events and the caching allocator (runtime/cuda.h).
// Allocator cases work on Storage directly so that they count exactly the blocks they make.

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/storage.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tessera;

namespace {

std::shared_ptr<Storage> cuda_storage(size_t nbytes) {
  return Storage::allocate(nbytes, Device::cuda(0));
}

}  // namespace

TEST_CASE("cuda_device_count answers on every machine with or without a driver", "[cuda]") {
  int n = -1;
  CHECK_NOTHROW(n = cuda_device_count());
  CHECK(n >= 0);
  CHECK(cuda_is_available() == (n > 0));
}

TEST_CASE("set_device and DeviceGuard switch devices and restore them", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const int last = cuda_device_count() - 1;
  cuda::set_device(0);
  CHECK(cuda::current_device() == 0);
  {
    cuda::DeviceGuard guard(Device::cuda(last));
    CHECK(cuda::current_device() == last);
    {
      cuda::DeviceGuard inner(Device::cuda(0));
      CHECK(cuda::current_device() == 0);
    }
    CHECK(cuda::current_device() == last);
    cuda::set_device(0);  // a change inside the guard is undone too
  }
  CHECK(cuda::current_device() == 0);
  {
    cuda::DeviceGuard cpu_guard(Device::cpu());  // guarding the CPU leaves the CUDA device alone
    CHECK(cuda::current_device() == 0);
  }
  CHECK(cuda::current_device() == 0);
}

TEST_CASE("invalid CUDA device indices raise DeviceError naming the device count", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const int n = cuda_device_count();
  CHECK_THROWS_AS(cuda::set_device(n), DeviceError);
  CHECK_THROWS_AS(cuda::set_device(-1), DeviceError);
  CHECK_THROWS_AS(cuda::DeviceGuard(Device::cuda(n)), DeviceError);
  CHECK_THROWS_AS(cuda::current_stream(n), DeviceError);
  CHECK_THROWS_AS(cuda::memory_stats(n), DeviceError);
  CHECK_THROWS_AS(cuda::synchronize(n), DeviceError);
  CHECK_THROWS_AS(cuda::Stream::create(Device::cuda(n)), DeviceError);
  CHECK_THROWS_AS(Tensor::make_empty({2}, kFloat32, Device::cuda(n)), DeviceError);
  try {
    Storage::allocate(16, Device::cuda(n));
    FAIL("allocating on a missing device must throw");
  } catch (const DeviceError& e) {
    const std::string message = e.what();
    CHECK(message.find("[empty] device cuda:" + std::to_string(n) + " is not available") !=
          std::string::npos);
    CHECK(message.find("this machine has " + std::to_string(n) + " CUDA devices") !=
          std::string::npos);
  }
  CHECK(cuda::current_device() == 0);
}

TEST_CASE("each thread has its own current stream per device; StreamGuard restores it", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  cuda::set_device(0);
  const cuda::Stream default_stream(Device::cuda(0));
  CHECK(default_stream.handle() == nullptr);
  CHECK(cuda::current_stream(0) == default_stream);
  CHECK(cuda::current_stream() == default_stream);

  const cuda::Stream mine = cuda::Stream::create(Device::cuda(0));
  const cuda::Stream other = cuda::Stream::create(Device::cuda(0), /*high_priority=*/true);
  CHECK(mine.handle() != nullptr);
  CHECK(other.handle() != nullptr);
  CHECK(mine != other);
  CHECK(mine.device() == Device::cuda(0));
  {
    cuda::StreamGuard guard(mine);
    CHECK(cuda::current_stream(0) == mine);
    CHECK(cuda::current_stream() == mine);

    // Catch2 assertions are not thread-safe: the thread records, the test checks after join.
    bool starts_on_default = false;
    bool sees_its_own = false;
    std::thread worker([&] {
      starts_on_default = cuda::current_stream(0) == default_stream;
      cuda::set_current_stream(other);
      sees_its_own = cuda::current_stream(0) == other;
    });
    worker.join();
    CHECK(starts_on_default);
    CHECK(sees_its_own);
    CHECK(cuda::current_stream(0) == mine);  // untouched by the worker's choice
    {
      cuda::StreamGuard nested(other);
      CHECK(cuda::current_stream(0) == other);
    }
    CHECK(cuda::current_stream(0) == mine);
  }
  CHECK(cuda::current_stream(0) == default_stream);
  cuda::set_current_stream(other);
  CHECK(cuda::current_stream(0) == other);
  cuda::set_current_stream(default_stream);
  CHECK(cuda::current_stream(0) == default_stream);
}

TEST_CASE("streams synchronize and query and wait on events", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const cuda::Stream first = cuda::Stream::create(Device::cuda(0));
  const cuda::Stream second = cuda::Stream::create(Device::cuda(0));
  CHECK_NOTHROW(first.synchronize());
  CHECK(first.query());
  CHECK_NOTHROW(cuda::Stream(Device::cuda(0)).synchronize());

  cuda::Event event;
  CHECK(event.handle() == nullptr);
  CHECK(event.query());  // nothing recorded yet
  CHECK_NOTHROW(event.synchronize());
  CHECK_NOTHROW(second.wait(event));  // waiting on an unrecorded event is a no-op

  event.record(first);
  CHECK(event.handle() != nullptr);
  CHECK(event.device() == Device::cuda(0));
  second.wait(event);
  event.synchronize();
  CHECK(event.query());
  second.synchronize();
  CHECK(second.query());

  {
    cuda::StreamGuard guard(second);
    event.record();  // on the current stream
    event.synchronize();
    CHECK(event.query());
  }

  cuda::Event moved = std::move(event);
  CHECK(moved.handle() != nullptr);
  // A moved-from event owns no handle (and its destructor destroys nothing).
  // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
  CHECK(event.handle() == nullptr);
  CHECK(moved.query());
  CHECK_NOTHROW(cuda::synchronize());
  CHECK_NOTHROW(cuda::synchronize(0));
}

TEST_CASE("timing events measure elapsed milliseconds", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const cuda::Stream stream = cuda::Stream::create(Device::cuda(0));
  cuda::Event start(/*enable_timing=*/true);
  cuda::Event end(/*enable_timing=*/true);
  CHECK_THROWS_AS(start.elapsed_ms(end), DeviceError);  // neither recorded
  start.record(stream);
  end.record(stream);
  end.synchronize();
  CHECK(start.elapsed_ms(end) >= 0.0f);

  cuda::Event untimed;
  untimed.record(stream);
  untimed.synchronize();
  CHECK_THROWS_AS(start.elapsed_ms(untimed), DeviceError);
}

TEST_CASE("the caching allocator reuses a freed block of the same size class", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  cuda::empty_cache();
  const cuda::MemoryStats base = cuda::memory_stats(0);
  CHECK(base.cached_bytes == 0);
  void* first = nullptr;
  {
    auto a = cuda_storage(1000);
    first = a->data();
    CHECK(first != nullptr);
    CHECK(a->device() == Device::cuda(0));
    CHECK(a->nbytes() == 1000);
    const cuda::MemoryStats s = cuda::memory_stats(0);
    CHECK(s.current_bytes == base.current_bytes + 1024);  // rounded to 512 B
    CHECK(s.num_device_mallocs == base.num_device_mallocs + 1);
    CHECK(s.num_allocs == base.num_allocs + 1);
  }
  const cuda::MemoryStats freed = cuda::memory_stats(0);
  CHECK(freed.current_bytes == base.current_bytes);
  CHECK(freed.cached_bytes == 1024);

  auto b = cuda_storage(700);  // the same 1024-byte class
  CHECK(b->data() == first);
  const cuda::MemoryStats reused = cuda::memory_stats(0);
  CHECK(reused.num_cache_hits == base.num_cache_hits + 1);
  CHECK(reused.num_device_mallocs == base.num_device_mallocs + 1);
  CHECK(reused.num_allocs == base.num_allocs + 2);
  CHECK(reused.cached_bytes == 0);
  CHECK(cuda::memory_stats().current_bytes == reused.current_bytes);  // -1: the current device
}

TEST_CASE("peak statistics follow allocations and reset to the current bytes", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  cuda::reset_peak_memory_stats(0);
  const cuda::MemoryStats base = cuda::memory_stats(0);
  CHECK(base.peak_bytes == base.current_bytes);
  {
    auto big = cuda_storage(size_t{3} << 20);  // rounded to 4 MiB
    CHECK(cuda::memory_stats(0).current_bytes == base.current_bytes + (int64_t{4} << 20));
  }
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.current_bytes == base.current_bytes);
  CHECK(after.peak_bytes == base.current_bytes + (int64_t{4} << 20));
  cuda::reset_peak_memory_stats();
  CHECK(cuda::memory_stats(0).peak_bytes == base.current_bytes);
}

TEST_CASE("empty_cache returns every cached block to the driver", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  { auto a = cuda_storage(size_t{5} << 20); }
  CHECK(cuda::memory_stats(0).cached_bytes >= (int64_t{6} << 20));
  cuda::empty_cache();
  const cuda::MemoryStats emptied = cuda::memory_stats(0);
  CHECK(emptied.cached_bytes == 0);
  auto b = cuda_storage(size_t{5} << 20);
  CHECK(cuda::memory_stats(0).num_device_mallocs == emptied.num_device_mallocs + 1);
}

TEST_CASE("a block freed on one stream is not reused by another stream", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  cuda::empty_cache();
  const cuda::Stream side = cuda::Stream::create(Device::cuda(0));
  void* on_default = nullptr;
  { on_default = cuda_storage(5000)->data(); }
  const cuda::MemoryStats base = cuda::memory_stats(0);
  void* on_side = nullptr;
  {
    cuda::StreamGuard guard(side);
    auto a = cuda_storage(5000);
    on_side = a->data();
    CHECK(on_side != on_default);
    CHECK(cuda::memory_stats(0).num_device_mallocs == base.num_device_mallocs + 1);
    CHECK(cuda::memory_stats(0).num_cache_hits == base.num_cache_hits);
  }
  {
    cuda::StreamGuard guard(side);
    auto again = cuda_storage(5000);
    CHECK(again->data() == on_side);
  }
  auto back = cuda_storage(5000);
  CHECK(back->data() == on_default);
  CHECK(cuda::memory_stats(0).num_cache_hits == base.num_cache_hits + 2);
  CHECK(cuda::memory_stats(0).num_device_mallocs == base.num_device_mallocs + 1);
}

TEST_CASE("zero-byte CUDA storage calls no cudaMalloc; CUDA data has no host pointer", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const cuda::MemoryStats base = cuda::memory_stats(0);
  {
    auto empty = cuda_storage(0);
    CHECK(empty->data() == nullptr);
    CHECK(empty->device() == Device::cuda(0));
    Tensor t = Tensor::make_empty({0, 3}, kFloat32, Device::cuda(0));
    CHECK(t.device() == Device::cuda(0));
    CHECK(t.numel() == 0);
  }
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.num_device_mallocs == base.num_device_mallocs);
  CHECK(after.num_allocs == base.num_allocs);
  CHECK(after.current_bytes == base.current_bytes);

  Tensor t = Tensor::make_empty({4}, kFloat32, Device::cuda(0));
  CHECK_THROWS_AS(t.raw_data(), DeviceError);
}

TEST_CASE("out of memory raises OutOfMemoryError and the allocator keeps working", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  { auto cached = cuda_storage(4096); }  // leaves a cached block for the retry to release
  const cuda::MemoryStats base = cuda::memory_stats(0);
  CHECK(base.cached_bytes > 0);
  const size_t absurd = size_t{1} << 50;  // 1 PiB
  try {
    cuda_storage(absurd);
    FAIL("a 1 PiB allocation must fail");
  } catch (const OutOfMemoryError& e) {
    const std::string message = e.what();
    CHECK(message.find(std::to_string(absurd)) != std::string::npos);
    CHECK(message.find("cuda:0") != std::string::npos);
    CHECK(message.find("in use") != std::string::npos);
    CHECK(message.find("cached") != std::string::npos);
  }
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.cached_bytes == 0);  // emptied before the retry
  CHECK(after.current_bytes == base.current_bytes);
  CHECK(after.num_allocs == base.num_allocs);

  // No stale error is left behind for the next CUDA call to report.
  auto small = cuda_storage(4096);
  CHECK(small->data() != nullptr);
  CHECK_NOTHROW(cuda::Stream(Device::cuda(0)).synchronize());
  CHECK_NOTHROW(cuda::synchronize());
  cuda::Event event;
  CHECK_NOTHROW(event.record());
  CHECK_NOTHROW(event.synchronize());
}

TEST_CASE("threads allocate and free concurrently on one device", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const cuda::MemoryStats base = cuda::memory_stats(0);
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      try {
        std::vector<std::shared_ptr<Storage>> live;
        for (int i = 0; i < kRounds; ++i) {
          live.push_back(
              Storage::allocate(static_cast<size_t>(256 * (1 + (i + t) % 7)), Device::cuda(0)));
          if (live.size() > 8) live.erase(live.begin());
        }
      } catch (const Error&) {
        ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int f : failures) CHECK(f == 0);
  const cuda::MemoryStats after = cuda::memory_stats(0);
  CHECK(after.current_bytes == base.current_bytes);
  CHECK(after.num_allocs == base.num_allocs + kThreads * kRounds);
}

TEST_CASE("the TF32 matmul switch is process-wide", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const bool before = cuda::matmul_allow_tf32();
  cuda::set_matmul_allow_tf32(true);
  bool seen_in_thread = false;
  std::thread([&] { seen_in_thread = cuda::matmul_allow_tf32(); }).join();
  CHECK(seen_in_thread);
  cuda::set_matmul_allow_tf32(false);
  CHECK_FALSE(cuda::matmul_allow_tf32());
  cuda::set_matmul_allow_tf32(before);
}
