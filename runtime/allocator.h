#pragma once
// CPU caching allocator.
//
// Note [CPU caching allocator]
// First touch of fresh memory is slow (page faults, ~0.25 GB/s with 4 KiB pages) and glibc hands
// large freed blocks back to the OS, so a naive `c = a + b` pays page faults on every call. The
// allocator keeps freed blocks in size classes (four classes per power of two) in a cache owned by
// the freeing thread (ranks are threads, so no lock on the hot path) and reuses them. Blocks of
// 2 MiB and more are 2 MiB aligned and advised for transparent huge pages. Byte counters are kept
// per thread (per rank): a block counts against the thread that allocated it until it is freed.

#include <cstddef>
#include <cstdint>

namespace tessera {

struct AllocatorStats {
  int64_t current_bytes = 0;   // live bytes allocated by this thread (block capacity)
  int64_t peak_bytes = 0;      // high-water mark of current_bytes since start or reset
  int64_t cached_bytes = 0;    // freed bytes held in this thread's cache for reuse
  int64_t num_allocs = 0;      // allocations requested by this thread
  int64_t num_cache_hits = 0;  // of which were served from the cache
};

namespace detail {
struct ThreadAllocState;
}

// One block of CPU memory; returned to the allocator by cpu_free.
struct CpuBlock {
  void* ptr = nullptr;
  size_t capacity = 0;  // bytes actually reserved (size-class rounded)
  int size_class = -1;  // -1: not cacheable (allocated with plain new)
  detail::ThreadAllocState* owner = nullptr;
};

CpuBlock cpu_alloc(size_t nbytes);
void cpu_free(const CpuBlock& block) noexcept;

// Counters of the calling thread.
AllocatorStats cpu_allocator_stats();
void reset_peak_cpu_memory_stats();
// Returns the calling thread's cached blocks to the system.
void empty_cache();
// Upper bound on bytes cached per thread (default 8 GiB, or TESSERA_CPU_CACHE_LIMIT_MB).
void set_cpu_cache_limit(size_t bytes);

}  // namespace tessera
