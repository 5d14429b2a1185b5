#pragma once
// The time a rank spends blocked in collectives: inside a synchronous call, inside wait() on an
// asynchronous one. A step's communication that no compute hides is that time (a collective in
// flight while the rank computes costs it nothing), so tessera-shardbench reads a step's exposed
// communication from it.

#include "tessera/collectives/work.h"

namespace tessera::dist {

// Counts, while it lives, the seconds the calling thread spends blocked in collectives: each
// synchronous call issued on it and each wait() it makes on an asynchronous one (issued on any
// thread). Guards nest; each sees the time since it was made. Costs nothing to collectives when
// no thread has one but a thread-local read per call.
class CollectiveWaitTimer {
 public:
  CollectiveWaitTimer();
  ~CollectiveWaitTimer();
  CollectiveWaitTimer(const CollectiveWaitTimer&) = delete;
  CollectiveWaitTimer& operator=(const CollectiveWaitTimer&) = delete;

  // Blocked seconds on this thread since the guard was made.
  double seconds() const;

 private:
  double start_;
};

namespace detail {
// Whether the calling thread counts its blocked time (a CollectiveWaitTimer lives on it).
bool timing_waits();
// Adds `seconds` to the calling thread's blocked time.
void add_wait_seconds(double seconds);
// `work` whose wait() adds the time it blocks to the waiting thread's count.
WorkPtr timed_work(WorkPtr work);
}  // namespace detail

}  // namespace tessera::dist
