#include "collectives/progress_thread.h"

#include "runtime/parallel.h"

namespace tessera::dist {

WorkPtr completed_work() {
  // Finished works are immutable: one shared instance serves every synchronous call.
  static const WorkPtr done = [] {
    auto work = std::make_shared<detail::FutureWork>();
    work->finish(nullptr);
    return work;
  }();
  return done;
}

namespace detail {

void FutureWork::wait() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool FutureWork::is_completed() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void FutureWork::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

ProgressThread::ProgressThread() : num_threads_(get_num_threads()) {}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

WorkPtr ProgressThread::submit(std::function<void()> fn, bool async_op) {
  std::shared_ptr<FutureWork> work;
  {
    std::unique_lock lock(mutex_);
    if (!async_op && pending_ == 0) {
      lock.unlock();
      fn();
      return completed_work();
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });  // before any state change
    work = std::make_shared<FutureWork>();
    queue_.push_back({std::move(fn), work});
    ++pending_;
  }
  cv_.notify_all();
  if (!async_op) work->wait();
  return work;
}

void ProgressThread::drain() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return pending_ == 0; });
}

void ProgressThread::loop() {
  set_num_threads(num_threads_);
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ with nothing left to run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      task.fn();
    } catch (...) {
      error = std::current_exception();
    }
    task.fn = nullptr;  // drop the call's tensors before the waiter resumes
    task.work->finish(error);
    lock.lock();
    --pending_;
    cv_.notify_all();
  }
}

}  // namespace detail
}  // namespace tessera::dist
