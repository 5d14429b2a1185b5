#include "tessera/runtime/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

#include "tessera/runtime/error.h"

namespace tessera {
namespace detail {

namespace {

constexpr size_t kMinBlock = 64;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr int kStepsPerOctave = 4;
constexpr int kNumClasses = 64 * kStepsPerOctave;

// Size class of n bytes: four classes per power of two, so rounding wastes at most 25%.
int size_class_of(size_t n) {
  n = std::max(n, kMinBlock);
  int octave = std::bit_width(n - 1) - 1;  // n - 1 in [2^octave, 2^(octave+1))
  size_t base = size_t{1} << octave;
  size_t step = base / kStepsPerOctave;
  int sub = static_cast<int>((n - 1 - base) / step);
  return octave * kStepsPerOctave + sub;
}

size_t class_capacity(int cls) {
  int octave = cls / kStepsPerOctave;
  int sub = cls % kStepsPerOctave;
  size_t base = size_t{1} << octave;
  return base + (base / kStepsPerOctave) * static_cast<size_t>(sub + 1);
}

size_t cache_limit_from_env() {
  if (const char* mb = std::getenv("TESSERA_CPU_CACHE_LIMIT_MB")) {
    return static_cast<size_t>(std::strtoull(mb, nullptr, 10)) << 20;
  }
  return size_t{8} << 30;
}

std::atomic<size_t> g_cache_limit{cache_limit_from_env()};

}  // namespace

// Counters are atomics because a block may be freed by another thread than its owner.
struct ThreadAllocState {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  int64_t cached = 0;  // only touched by the owning thread
  int64_t num_allocs = 0;
  int64_t num_cache_hits = 0;
};

namespace {

// States are never destroyed: a block freed after its owner thread exited still finds its
// counters. One small struct per thread that ever allocated.
ThreadAllocState* new_thread_state() {
  static std::mutex mu;
  static std::deque<ThreadAllocState> states;
  std::lock_guard<std::mutex> lock(mu);
  return &states.emplace_back();
}

void* system_alloc(size_t capacity) {
  size_t align = capacity >= kHugePage ? kHugePage : kMinBlock;
  void* p = std::aligned_alloc(align, (capacity + align - 1) / align * align);
  if (p == nullptr) {
    throw OutOfMemoryError(
        concat_message("[cpu_alloc] out of memory allocating ", capacity, " bytes"));
  }
  if (capacity >= kHugePage) madvise(p, capacity, MADV_HUGEPAGE);
  return p;
}

struct ThreadCache {
  ThreadAllocState* state = new_thread_state();
  std::vector<void*> free_lists[kNumClasses];

  void release_all() {
    for (int c = 0; c < kNumClasses; ++c) {
      for (void* p : free_lists[c]) std::free(p);
      free_lists[c].clear();
    }
    state->cached = 0;
  }
  ~ThreadCache() { release_all(); }
};

ThreadCache& thread_cache() {
  thread_local ThreadCache cache;
  return cache;
}

}  // namespace
}  // namespace detail

CpuBlock cpu_alloc(size_t nbytes) {
  auto& cache = detail::thread_cache();
  auto* st = cache.state;
  int cls = detail::size_class_of(nbytes);
  size_t capacity = detail::class_capacity(cls);
  ++st->num_allocs;
  void* p;
  auto& list = cache.free_lists[cls];
  if (!list.empty()) {
    p = list.back();
    list.pop_back();
    st->cached -= static_cast<int64_t>(capacity);
    ++st->num_cache_hits;
  } else {
    p = detail::system_alloc(capacity);
  }
  int64_t cur =
      st->current.fetch_add(static_cast<int64_t>(capacity)) + static_cast<int64_t>(capacity);
  int64_t peak = st->peak.load(std::memory_order_relaxed);
  while (cur > peak && !st->peak.compare_exchange_weak(peak, cur)) {
  }
  return CpuBlock{p, capacity, cls, st};
}

void cpu_free(const CpuBlock& block) noexcept {
  if (block.ptr == nullptr) return;
  block.owner->current.fetch_sub(static_cast<int64_t>(block.capacity));
  auto& cache = detail::thread_cache();
  if (static_cast<size_t>(cache.state->cached) + block.capacity <= detail::g_cache_limit.load()) {
    try {
      cache.free_lists[block.size_class].push_back(block.ptr);
      cache.state->cached += static_cast<int64_t>(block.capacity);
      return;
    } catch (...) {  // no memory to grow the free list: give the block back instead
    }
  }
  std::free(block.ptr);
}

AllocatorStats cpu_allocator_stats() {
  auto* st = detail::thread_cache().state;
  return AllocatorStats{st->current.load(), st->peak.load(), st->cached, st->num_allocs,
                        st->num_cache_hits};
}

void reset_peak_cpu_memory_stats() {
  auto* st = detail::thread_cache().state;
  st->peak.store(st->current.load());
}

void empty_cache() { detail::thread_cache().release_all(); }

void set_cpu_cache_limit(size_t bytes) { detail::g_cache_limit.store(bytes); }

}  // namespace tessera
