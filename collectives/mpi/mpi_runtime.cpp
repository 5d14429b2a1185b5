#include "tessera/collectives/mpi/mpi_runtime.h"

#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>

#include "tessera/collectives/dist.h"
#include "tessera/runtime/error.h"

namespace tessera::dist::detail {

namespace {

using Clock = std::chrono::steady_clock;

int world_rank() {
  int rank = -1;
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

[[noreturn]] void abort_job(const std::string& message) {
  std::fprintf(stderr, "[tessera] rank %d: %s; aborting the MPI job\n", world_rank(),
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

[[noreturn]] void on_terminate() {
  std::string what = "std::terminate was called without an active exception";
  if (const std::exception_ptr error = std::current_exception()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = std::string("uncaught exception: ") + e.what();
    } catch (...) {
      what = "uncaught exception not derived from std::exception";
    }
  }
  abort_job(what);
}

// See Note [MPI job failure].
class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* watchdog = new Watchdog();  // lives until exit; stopped by finalize_at_exit
    return *watchdog;
  }

  void add(WatchdogScope* scope) {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable() && !stopped_) thread_ = std::thread([this] { loop(); });
    scope->next = head_;
    if (head_ != nullptr) head_->prev = scope;
    head_ = scope;
  }

  void remove(WatchdogScope* scope) {
    std::lock_guard lock(mutex_);
    (scope->prev != nullptr ? scope->prev->next : head_) = scope->next;
    if (scope->next != nullptr) scope->next->prev = scope->prev;
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Polls, so that registering never wakes the thread; timeouts fire within kPoll.
  void loop() {
    constexpr auto kPoll = std::chrono::milliseconds(50);
    std::unique_lock lock(mutex_);
    while (!stopped_) {
      cv_.wait_for(lock, kPoll);
      const Clock::time_point now = Clock::now();
      for (const WatchdogScope* s = head_; s != nullptr; s = s->next) {
        if (now >= s->deadline) {
          abort_job(::tessera::detail::concat_message("[", s->op, "] timed out after ",
                                                      s->timeout.count(), " ms on ", *s->where));
        }
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  WatchdogScope* head_ = nullptr;
  bool stopped_ = false;
  std::thread thread_;
};

bool g_we_initialized = false;

void finalize_at_exit() {
  // The world's communicators go before MPI does; user-held groups skip MPI_Comm_free later.
  destroy_process_group();
  Watchdog::instance().stop();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_we_initialized && !finalized) MPI_Finalize();
}

}  // namespace

void throw_mpi_error(const char* expr, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CommError(::tessera::detail::concat_message(
      "[mpi] ", expr, " failed: ", std::string(text, static_cast<size_t>(length))));
}

bool ensure_mpi_initialized() {
  static const bool multiple = [] {
    int initialized = 0;
    TS_MPI_CHECK(MPI_Initialized(&initialized));
    int provided = MPI_THREAD_SINGLE;
    if (initialized) {
      TS_MPI_CHECK(MPI_Query_thread(&provided));
    } else {
      // Note [Polling MPI yields]: an asynchronous collective runs on the group's progress
      // thread beside the rank's compute, and Open MPI's waits poll a core at full speed unless
      // the job is oversubscribed; yielding lets the compute have it (FSDP with prefetch on 2
      // processes on 2 cores: 84.6 ms a step polling, 67.2 yielding; its exposed communication
      // 8.0 ms against 3.9). Only a default: the job's own setting of the parameter stands.
      setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
      TS_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
      g_we_initialized = true;
    }
    std::set_terminate(on_terminate);
    std::atexit(finalize_at_exit);
    return provided >= MPI_THREAD_MULTIPLE;
  }();
  return multiple;
}

MPI_Datatype unit_type(size_t element_size) {
  switch (element_size) {
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    case 8:
      return MPI_UINT64_T;
    default:
      TS_INTERNAL_ASSERT(false, "no MPI type for ", element_size, "-byte elements");
  }
}

int to_mpi_count(int64_t count, const char* op) {
  TS_CHECK(count <= INT_MAX, "[", op, "] the mpi backend moves at most ", INT_MAX,
           " elements per rank and call (MPI counts are int), got ", count);
  return static_cast<int>(count);
}

WatchdogScope::WatchdogScope(const char* op_name, const std::string& where_text,
                             std::chrono::milliseconds timeout_ms)
    : op(op_name), where(&where_text), timeout(timeout_ms), deadline(Clock::now() + timeout_ms) {
  Watchdog::instance().add(this);
}

WatchdogScope::~WatchdogScope() { Watchdog::instance().remove(this); }

}  // namespace tessera::dist::detail
