#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include "tessera/collectives/backends.h"
#include "tessera/collectives/threads/process_group_threads.h"
#include "tessera/runtime/parallel.h"

namespace tessera::dist {

namespace {

std::string describe_exception(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

// A program started by a launcher that makes rank threads runs one copy per launched process,
// each its own world: said once per process, by the launcher's rank 0 where it is known.
void warn_if_launched(int world_size) {
  if (!started_by_launcher()) return;
  const std::optional<int> processes = launcher_world_size();
  const std::optional<int> rank = launcher_rank();
  if ((processes.has_value() && *processes <= 1) || (rank.has_value() && *rank != 0)) return;
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(
        stderr,
        "[run_threads] warning: this process was started by an MPI launcher%s, but run_threads "
        "runs its %d ranks as threads of this process alone: every launched process runs its own "
        "copy of the program. Join the launched world with dist::init_process_group() instead "
        "(README, \"SPMD programs in C++\"), or start the program without the launcher.\n",
        processes.has_value() ? fmt::format(" as one of {} processes", *processes).c_str() : "",
        world_size);
  });
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> ranks(static_cast<size_t>(n));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

}  // namespace

void run_threads(int world_size, const std::function<void(ProcessGroupPtr world)>& fn,
                 const ThreadsOptions& options) {
  TS_CHECK(world_size >= 1, "[run_threads] world_size must be at least 1, got ", world_size);
  TS_CHECK(static_cast<bool>(fn), "[run_threads] the function to run on every rank is empty");
  TS_CHECK(options.timeout.count() > 0, "[run_threads] the timeout must be positive, got ",
           options.timeout.count(), " ms");
  if (options.warn_if_launched) warn_if_launched(world_size);
  auto world = std::make_shared<detail::ThreadsWorld>(world_size, options.detect_deadlocks);
  const std::vector<int> ranks = iota_ranks(world_size);
  // The ranks share the caller's intra-op threads (OMP_NUM_THREADS, or every hardware thread).
  const int threads_per_rank = std::max(1, get_num_threads() / world_size);

  std::mutex failure_mutex;
  std::exception_ptr first_failure;
  const auto rank_main = [&](int rank) {
    set_num_threads(threads_per_rank);
    {
      auto group = std::make_shared<detail::ProcessGroupThreads>(world->join_group("", ranks), rank,
                                                                 options.timeout);
      detail::set_thread_world(group);
      world->enter_rank_thread(rank);
      try {
        fn(group);
      } catch (...) {
        const std::exception_ptr error = std::current_exception();
        {
          std::lock_guard lock(failure_mutex);
          if (!first_failure) first_failure = error;
        }
        world->abort(fmt::format("rank {} failed: {}", rank, describe_exception(error)));
      }
      world->leave_rank_thread();
      detail::set_thread_world(nullptr);
      // Async collectives this rank issued still run: they may be what peers wait for.
      world->drain(rank);
    }
    world->mark_exited(rank);
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world_size));
  try {
    for (int r = 0; r < world_size; ++r) threads.emplace_back(rank_main, r);
  } catch (const std::system_error& e) {
    world->abort(fmt::format("run_threads could not start rank {}: {}", threads.size(), e.what()));
    for (auto& t : threads) t.join();
    throw CommError(fmt::format("[run_threads] could not start rank {} of {}: {}", threads.size(),
                                world_size, e.what()));
  }
  for (auto& t : threads) t.join();
  if (first_failure) std::rethrow_exception(first_failure);
}

namespace detail {

ProcessGroupPtr make_threads_world(const InitOptions& options) {
  auto world = std::make_shared<ThreadsWorld>(1);
  return std::make_shared<ProcessGroupThreads>(world->join_group("", {0}), 0, options.timeout);
}

}  // namespace detail
}  // namespace tessera::dist
