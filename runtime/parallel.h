#pragma once
// Intra-op parallelism per rank: each thread (rank) has its own thread count, and kernels split
// work with parallel_for. Work below `grain` elements runs inline on the caller.

#include <cstdint>
#include <functional>

namespace tessera {

// This thread's intra-op threads; by default OMP_NUM_THREADS when it holds a positive number,
// else every hardware thread (as PyTorch). run_threads divides the caller's among its ranks.
void set_num_threads(int n);
int get_num_threads();

// Sets the calling thread's intra-op threads for a scope and restores the previous count when the
// scope ends, however it ends (benchmarks and calibrations timing one count against another).
class IntraOpThreadsGuard {
 public:
  explicit IntraOpThreadsGuard(int n) : saved_(get_num_threads()) { set_num_threads(n); }
  ~IntraOpThreadsGuard() { set_num_threads(saved_); }
  IntraOpThreadsGuard(const IntraOpThreadsGuard&) = delete;
  IntraOpThreadsGuard& operator=(const IntraOpThreadsGuard&) = delete;

 private:
  int saved_;
};

namespace detail {
void parallel_for_impl(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& f);
}

// Calls f(chunk_begin, chunk_end) over disjoint chunks covering [begin, end).
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end - begin <= grain || get_num_threads() == 1) {
    if (end > begin) f(begin, end);
    return;
  }
  detail::parallel_for_impl(begin, end, grain, f);
}

// Elements per chunk below which splitting across threads costs more than it saves.
inline constexpr int64_t kElementwiseGrain = 32768;

}  // namespace tessera
