#include "tessera/collectives/progress_thread.h"

#include <stdexcept>
#include <string>
#include <typeinfo>

#include "tessera/runtime/error.h"
#include "tessera/runtime/parallel.h"

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

thread_local bool tls_on_progress_thread = false;

// Throws a new exception equal to `error`'s when its dynamic type is one of `Types` (the same type
// and message), else rethrows the stored object. Rethrowing the stored object itself hands one
// object to two threads: the waiter reads it in its handler while the progress thread may hold
// the last reference and destroy it. That is safe (the count is atomic), but the count lives in
// the uninstrumented C++ runtime, so ThreadSanitizer cannot see the order and reports a race; with
// a copy per waiter, each thread destroys only what it made. Only exact types are copied, so that
// a subclass (std::system_error, a caller's own) keeps its type and its data.
template <typename... Types>
[[noreturn]] void throw_copy_if_one_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    const std::type_info& type = typeid(e);
    // A fresh message string, not one shared copy-on-write with the stored object.
    ((type == typeid(Types) ? throw Types(std::string(e.what())) : void()), ...);
    throw;
  }
}

[[noreturn]] void throw_copy_of(const std::exception_ptr& error) {
  throw_copy_if_one_of<Error, ShapeError, DTypeError, IndexError, DeviceError, OutOfMemoryError,
                       CommError, NotSupportedError, std::runtime_error, std::logic_error,
                       std::invalid_argument, std::out_of_range>(error);
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

bool on_progress_thread() { return tls_on_progress_thread; }

bool ProgressThread::busy() {
  std::lock_guard lock(mutex_);
  return pending_ > 0;
}

void ProgressThread::drain() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return pending_ == 0; });
}

void ProgressThread::loop() {
  set_num_threads(num_threads_);
  tls_on_progress_thread = true;
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
