#pragma once
// One benchmark case of vs_libtorch: the same computation written against Tessera and against
// libtorch, timed alternately in one process (this VM's speed drifts by tens of percent over
// seconds, so timing one library after the other would measure the drift).

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace tessera::bench::vs_libtorch {

struct Case {
  std::string name;
  double target;                         // the bound on tessera / libtorch
  std::function<void()> tessera;         // one call of the Tessera side
  std::function<void()> libtorch;        // one call of the libtorch side
  std::function<double()> max_rel_diff;  // both sides' results compared after timing
  int calls_per_sample = 1;              // very short cases are timed in batches
};

struct CaseTiming {
  double tessera_s;     // median seconds per call
  double libtorch_s;    // median seconds per call
  double ratio;         // median of the per-round ratios tessera / libtorch
  int crowded_samples;  // samples that began with another thread still running (see below)
};

namespace detail {

inline double seconds_per_call(const std::function<void()>& f, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}

// Note [Starting each sample on quiet cores]
// After a call, each library's thread pool keeps its workers spinning for a while before they
// sleep: libgomp's for GOMP_SPINCOUNT, the pthread OpenBLAS under libtorch for 2^28 cycles
// (OPENBLAS_THREAD_TIMEOUT, ~0.1 s here). A sample timed right after the other side's then
// shares the cores with those spinners: at 2 threads on 2 cores one of its threads runs at half
// speed, and every barrier waits for it (the 2-thread rows moved by 2x between runs). So each
// sample starts once no other thread of this process is running, as when either library runs
// alone, waiting at most `limit`; the samples that still started crowded are counted.
inline bool other_threads_running() {
  const long self = syscall(SYS_gettid);
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    if (task.path().filename() == std::to_string(self)) continue;
    std::ifstream in(task.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    // "tid (name) S ...": the name may hold spaces and parentheses, the state follows the last ')'.
    const size_t close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'R') {
      return true;
    }
  }
  return false;
}

// Whether the other threads went quiet within `limit`.
inline bool wait_for_quiet_cores(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (other_threads_running()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace detail

// Rounds of A B, then B A, ... after two warm-up calls of each (pages touched, caches and
// allocators warm); each sample starts on quiet cores (See Note [Starting each sample on quiet
// cores]).
inline CaseTiming time_case(const Case& c, int rounds) {
  for (int i = 0; i < 2; ++i) {
    c.tessera();
    c.libtorch();
  }
  std::vector<double> a, b, ratios;
  int crowded = 0;
  const auto sample = [&](const std::function<void()>& f) {
    crowded += detail::wait_for_quiet_cores(std::chrono::milliseconds(500)) ? 0 : 1;
    return detail::seconds_per_call(f, c.calls_per_sample);
  };
  for (int i = 0; i < rounds; ++i) {
    double ta = 0.0;
    double tb = 0.0;
    if (i % 2 == 0) {
      ta = sample(c.tessera);
      tb = sample(c.libtorch);
    } else {
      tb = sample(c.libtorch);
      ta = sample(c.tessera);
    }
    a.push_back(ta);
    b.push_back(tb);
    ratios.push_back(ta / tb);
  }
  return {detail::median(a), detail::median(b), detail::median(ratios), crowded};
}

}  // namespace tessera::bench::vs_libtorch
