#include "tessera/collectives/wait_timer.h"

#include <chrono>
#include <memory>
#include <utility>

namespace tessera::dist {

namespace {

thread_local int t_timers = 0;              // CollectiveWaitTimers alive on this thread
thread_local double t_blocked_seconds = 0;  // while any was

using Clock = std::chrono::steady_clock;

class TimedWork final : public Work {
 public:
  explicit TimedWork(WorkPtr work) : work_(std::move(work)) {}
  void wait() override {
    if (!detail::timing_waits()) {
      work_->wait();
      return;
    }
    const auto t0 = Clock::now();
    struct Add {
      Clock::time_point t0;
      ~Add() { detail::add_wait_seconds(std::chrono::duration<double>(Clock::now() - t0).count()); }
    } add{t0};  // a wait that rethrows blocked too
    work_->wait();
  }
  bool is_completed() const override { return work_->is_completed(); }

 private:
  WorkPtr work_;
};

}  // namespace

CollectiveWaitTimer::CollectiveWaitTimer() : start_(t_blocked_seconds) { ++t_timers; }
CollectiveWaitTimer::~CollectiveWaitTimer() { --t_timers; }
double CollectiveWaitTimer::seconds() const { return t_blocked_seconds - start_; }

namespace detail {
bool timing_waits() { return t_timers > 0; }
void add_wait_seconds(double seconds) { t_blocked_seconds += seconds; }
WorkPtr timed_work(WorkPtr work) { return std::make_shared<TimedWork>(std::move(work)); }
}  // namespace detail

}  // namespace tessera::dist
