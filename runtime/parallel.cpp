#include "tessera/runtime/parallel.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "tessera/runtime/error.h"

namespace tessera {

namespace {
// As PyTorch: OMP_NUM_THREADS when it holds a positive number, else every hardware thread.
int default_threads() {
  static const int threads = [] {
    if (const char* env = std::getenv("OMP_NUM_THREADS")) {
      char* end = nullptr;
      const long n = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && n >= 1 && n <= 4096) return static_cast<int>(n);
    }
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return threads;
}
thread_local int t_num_threads = 0;  // 0: not set, use the default
}  // namespace

void set_num_threads(int n) {
  TS_CHECK(n >= 1, "[set_num_threads] expects a positive number of threads, got ", n);
  t_num_threads = n;
}

int get_num_threads() { return t_num_threads > 0 ? t_num_threads : default_threads(); }

namespace detail {

void parallel_for_impl(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& f) {
  int64_t n = end - begin;
  int threads = static_cast<int>(std::min<int64_t>(get_num_threads(), (n + grain - 1) / grain));
  if (threads <= 1) {
    f(begin, end);
    return;
  }
  int64_t chunk = (n + threads - 1) / threads;
  // An exception must not escape an OpenMP region: keep the first and rethrow after.
  std::exception_ptr error;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int i = 0; i < threads; ++i) {
    int64_t b = begin + i * chunk;
    int64_t e = std::min(end, b + chunk);
    if (b >= e) continue;
    try {
      f(b, e);
    } catch (...) {
#pragma omp critical(tessera_parallel_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace detail
}  // namespace tessera
