#include <catch2/catch.hpp>
#include <thread>

#include "tessera/tessera.h"

using namespace tessera;

TEST_CASE("caching allocator reuses freed blocks and counts per thread", "[runtime][allocator]") {
  // Run on a fresh thread so the counters start from zero.
  std::thread([] {
    AllocatorStats s0 = cpu_allocator_stats();
    CHECK(s0.current_bytes == 0);
    void* first_ptr;
    {
      Tensor a = Tensor::make_empty({1000}, kFloat32, Device::cpu());
      first_ptr = a.raw_data();
      AllocatorStats s1 = cpu_allocator_stats();
      CHECK(s1.current_bytes >= 4000);
      CHECK(s1.current_bytes <= 5000);  // size classes waste at most 25%
      CHECK(s1.peak_bytes == s1.current_bytes);
    }
    AllocatorStats s2 = cpu_allocator_stats();
    CHECK(s2.current_bytes == 0);
    CHECK(s2.cached_bytes >= 4000);
    Tensor b = Tensor::make_empty({990}, kFloat32, Device::cpu());  // same size class
    CHECK(b.raw_data() == first_ptr);
    CHECK(cpu_allocator_stats().num_cache_hits == 1);
    CHECK(cpu_allocator_stats().cached_bytes == 0);
    b = Tensor();
    empty_cache();
    CHECK(cpu_allocator_stats().cached_bytes == 0);
    // Large blocks are aligned for huge pages.
    Tensor big = Tensor::make_empty({1 << 20}, kFloat32, Device::cpu());
    CHECK(reinterpret_cast<uintptr_t>(big.raw_data()) % (2 << 20) == 0);
    reset_peak_cpu_memory_stats();
    CHECK(cpu_allocator_stats().peak_bytes == cpu_allocator_stats().current_bytes);
  }).join();
}

TEST_CASE("a block freed on another thread leaves its owner's counter", "[runtime][allocator]") {
  Tensor t;
  int64_t owner_before = 0;
  std::thread([&] {
    owner_before = cpu_allocator_stats().current_bytes;
    t = Tensor::make_empty({256}, kFloat64, Device::cpu());
  }).join();
  CHECK(owner_before == 0);
  int64_t mine = cpu_allocator_stats().current_bytes;
  t = Tensor();  // freed here, counted against the (exited) owner, cached by this thread
  CHECK(cpu_allocator_stats().current_bytes == mine);
  empty_cache();
}
