// Note [Trials on a waking thread team]
// The GEMM choice times its backends on the first product of a shape class (Note [CPU float32
// GEMM choice] in linalg.cpp), often the first multi-threaded work of the process. On the
// project's 2-core VMs a core that has idled runs a thread's share slowly for ~100 ms after it is
// first asked to: at two threads the first 14 products of attention's heads (64 x 32 x 64, 64 of
// them, ~65 us each once warm) took 5.2-8.0 ms each, every backend alike, so the trial's medians
// (5.4-7.6 ms for all three backends) measured the waking core and picked a backend at random
// for the rest of the process: in 3 of 8 processes one 1.3-1.7x slower than the tile kernels.
// So before timing on more than one thread the team is woken: parallel regions in which each
// thread spins for 50 us, until three in a row take under twice that (a team whose threads all
// run), within a budget of 300 ms. On an awake team that is three regions (~150 us); on a waking
// one it takes the time the first products would have taken anyway (~100 ms). Once per process
// and team size: the trials come with a program's first steps, and a team that can never be
// prompt (rank threads whose teams together ask for more cores than there are) must not spin
// away the budget at every trial.

#include "tessera/kernels/cpu/thread_team.h"

#include <omp.h>

#include <chrono>
#include <mutex>
#include <set>

namespace tessera::cpu {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::microseconds kSpin{50};
constexpr int kPromptRegionsInARow = 3;
constexpr std::chrono::milliseconds kBudget{300};

// Busy until `spin` has passed on this thread.
void spin_for(std::chrono::microseconds spin) {
  const auto until = Clock::now() + spin;
  while (Clock::now() < until) {
  }
}

}  // namespace

void wait_until_thread_team_awake() {
  const int threads = omp_get_max_threads();
  if (threads <= 1) return;
  static std::mutex mutex;
  static std::set<int> woken;  // team sizes already waited for
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!woken.insert(threads).second) return;
  }
  const auto deadline = Clock::now() + kBudget;
  int prompt = 0;
  while (prompt < kPromptRegionsInARow && Clock::now() < deadline) {
    const auto start = Clock::now();
#pragma omp parallel num_threads(threads)
    spin_for(kSpin);
    prompt = Clock::now() - start < 2 * kSpin ? prompt + 1 : 0;
  }
}

}  // namespace tessera::cpu
