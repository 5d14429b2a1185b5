#pragma once
// Internal: async_op for the CPU backends. Each (group, rank) runs its queued collectives in issue
// order on its own thread, so collectives on different groups progress independently (the row
// and column groups of a mesh), like one stream per communicator on a GPU.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "tessera/collectives/work.h"

namespace tessera::dist::detail {

// Completed by a ProgressThread task.
class FutureWork final : public Work {
 public:
  void wait() override;
  bool is_completed() const override;
  void finish(std::exception_ptr error);

 private:
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// Whether the calling thread is a ProgressThread's (Note [Deadlocks among rank threads]).
bool on_progress_thread();

class ProgressThread {
 public:
  ProgressThread();
  // Runs what is queued, then joins.
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // async_op: queues fn and returns its Work. Otherwise runs fn on the calling thread, after the
  // queued calls when there are any (issue order is collective order), and returns a completed
  // Work or throws fn's error.
  WorkPtr submit(std::function<void()> fn, bool async_op);
  // Blocks until nothing is queued or running.
  void drain();
  // Whether anything is queued or running.
  bool busy();

 private:
  struct Task {
    std::function<void()> fn;
    std::shared_ptr<FutureWork> work;
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  int pending_ = 0;  // queued or running
  bool stop_ = false;
  int num_threads_;  // the creating rank's intra-op threads, for the progress thread
  std::thread thread_;
};

}  // namespace tessera::dist::detail
