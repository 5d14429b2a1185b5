#include "collectives/progress_thread.h"

#include <stdexcept>
#include <string>

#include "runtime/error.h"
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
namespace {

// Throws a new exception equal to `error`'s: its type (the most derived of Tessera's errors, else
// the standard bases) and its message. Rethrowing the stored object itself would hand one object
// to two threads: the waiter reads it in its handler while the progress thread may hold the last
// reference and destroy it. That is safe (the count is atomic), but the count lives in the
// uninstrumented C++ runtime, so ThreadSanitizer cannot see the order and reports a race; with a
// copy per waiter, each thread destroys only what it made. Types beyond these are rethrown as is.
template <typename First, typename... Rest>
[[noreturn]] void throw_copy_as(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const First& e) {
    throw First(std::string(e.what()));  // a fresh message, not a shared copy-on-write one
  } catch (...) {
    if constexpr (sizeof...(Rest) > 0) {
      throw_copy_as<Rest...>(error);
    } else {
      throw;
    }
  }
}

[[noreturn]] void throw_copy_of(const std::exception_ptr& error) {
  // Most derived first: a handler for a base catches its subclasses too.
  throw_copy_as<ShapeError, DTypeError, IndexError, DeviceError, OutOfMemoryError, CommError,
                NotSupportedError, Error, std::invalid_argument, std::out_of_range,
                std::logic_error, std::runtime_error>(error);
}

}  // namespace

void FutureWork::wait() {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) throw_copy_of(error_);
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
    task.work->finish(std::move(error));
    lock.lock();
    --pending_;
    cv_.notify_all();
  }
}

}  // namespace detail
}  // namespace tessera::dist
