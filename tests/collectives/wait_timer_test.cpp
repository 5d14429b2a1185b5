// dist::CollectiveWaitTimer (the exposed communication of tessera-shardbench): the time a rank
// thread is blocked in a synchronous collective or in wait() on an asynchronous one, and none of
// the time an asynchronous one is in flight while the rank does something else. The bounds come
// from sleeps (at least their length), not from how fast anything runs.

#include "tessera/collectives/wait_timer.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "tessera/tessera.h"

namespace tessera::dist {
namespace {

using std::chrono::milliseconds;

void await(const std::atomic<bool>& flag) {
  while (!flag.load()) std::this_thread::yield();
}

TEST_CASE("the wait timer counts blocked time and not time in flight", "[collectives][threads]") {
  std::atomic<bool> rank0_calls{false}, rank1_done{false};
  std::mutex mutex;
  double sync_blocked = 0, async_blocked = -1, untimed = -1;
  run_threads(2, [&](ProcessGroupPtr world) {
    const Tensor t = ones({16});
    const bool rank0 = world->rank() == 0;
    // Synchronous: rank 1 calls at least 50 ms after rank 0 started timing, so rank 0 is blocked
    // at least that long inside the call.
    {
      const CollectiveWaitTimer timer;
      if (rank0) {
        rank0_calls = true;
      } else {
        await(rank0_calls);
        std::this_thread::sleep_for(milliseconds(50));
      }
      world->all_reduce(t)->wait();
      if (rank0) {
        std::lock_guard lock(mutex);
        sync_blocked = timer.seconds();
      }
    }
    // Asynchronous: rank 0 issues, then sleeps 60 ms (its compute) while the collective
    // completes, and waits on a finished one: the sleep is not blocked time.
    {
      const CollectiveWaitTimer timer;
      const WorkPtr work = world->all_reduce(t, ReduceOp::Sum, {.async_op = true});
      if (rank0) {
        std::this_thread::sleep_for(milliseconds(60));
        await(rank1_done);
        while (!work->is_completed()) std::this_thread::yield();
        work->wait();
        std::lock_guard lock(mutex);
        async_blocked = timer.seconds();
      } else {
        work->wait();
        rank1_done = true;
      }
    }
    // Time blocked before a timer exists is not counted by it.
    world->all_reduce(t)->wait();
    const CollectiveWaitTimer after;
    if (rank0) {
      std::lock_guard lock(mutex);
      untimed = after.seconds();
    }
  });
  CHECK(sync_blocked >= 0.05);
  CHECK(async_blocked >= 0.0);
  CHECK(async_blocked < 0.05);  // the issue and a wait on a finished collective, not the 60 ms
  CHECK(untimed == 0.0);
}

}  // namespace
}  // namespace tessera::dist
