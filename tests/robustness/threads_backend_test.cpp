// The threads backend when ranks leave a collective early, a rank uses a group from two threads,
// or ranks disagree on what a collective is for (issue 52, rows 1, 2 and 10): an Error on every
// rank, never a crash or mixed data. One forked child per case (forked_case.h); the racy cases
// repeat a few times, since they depend on timing.

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "tests/robustness/forked_case.h"

namespace tessera::robustness_test {
namespace {

constexpr int kRepeats = 4;
// Large enough that a peer's read of it (into memory touched for the first time) is still going
// when a failing rank aborts the world.
constexpr int64_t kRows = 1 << 12;
constexpr int64_t kCols = 1 << 10;

// Runs body on 4 rank threads, rank 0 raising `fail_after` into the run; the others must see a
// tessera::Error (the abort) or finish.
void rank_zero_fails_beside(const std::function<void(const DeviceMesh&)>& body,
                            std::chrono::milliseconds fail_after) {
  for (int i = 0; i < kRepeats; ++i) {
    try {
      dist::run_threads(4, [&](dist::ProcessGroupPtr world) {
        const DeviceMesh mesh(DeviceType::CPU, {2, 2}, {"dp", "tp"});
        if (world->rank() == 0) {
          std::this_thread::sleep_for(fail_after);
          throw Error("rank 0's own op failed");
        }
        body(mesh);
      });
    } catch (const Error& e) {
      if (std::string(e.what()).find("rank 0's own op failed") == std::string::npos) throw;
    }
  }
}

TEST_CASE("robustness: a world aborting while peers read a subgroup's buffers (row 1)",
          "[robustness]") {
  expect_success("distribute_tensor over mesh[\"tp\"] and the 2-D mesh beside a failing rank", [] {
    rank_zero_fails_beside(
        [](const DeviceMesh& mesh) {
          for (int k = 0; k < 8; ++k) {
            const DTensor a = distribute_tensor(ones({kRows, kCols}), mesh["tp"], {Shard(0)});
            const DTensor b =
                distribute_tensor(ones({kRows, kCols}), mesh, {Shard(0), Replicate()});
            (void)(a.to_local().numel() + b.to_local().numel());
          }
        },
        std::chrono::milliseconds(5));
  });
  expect_success("broadcasts and all_reduces on the tp subgroup beside a failing rank", [] {
    rank_zero_fails_beside(
        [](const DeviceMesh& mesh) {
          const dist::ProcessGroupPtr tp = mesh.get_group("tp");
          for (int k = 0; k < 8; ++k) {
            Tensor big = full({kRows, kCols}, static_cast<double>(k));
            tp->broadcast(big, 0);
            Tensor sum = ones({kRows, kCols});
            tp->all_reduce(sum);
          }
        },
        std::chrono::milliseconds(2));
  });
}

TEST_CASE("robustness: two threads of one rank using one group (row 2)", "[robustness]") {
  expect_error("a user std::thread calling full_tensor() while the rank thread does",
               [] {
                 dist::run_threads(2, [](dist::ProcessGroupPtr) {
                   const DeviceMesh mesh(DeviceType::CPU, {2});
                   const DTensor d = distribute_tensor(ones({kRows, kCols}), mesh, {Shard(0)});
                   std::atomic<bool> stop{false};
                   std::string helper_error;
                   std::thread helper([&] {
                     try {
                       while (!stop.load()) (void)d.full_tensor();
                     } catch (const Error& e) {
                       helper_error = e.what();
                     }
                   });
                   try {
                     for (int k = 0; k < 50 && helper_error.empty(); ++k) (void)d.full_tensor();
                   } catch (...) {
                     stop = true;
                     helper.join();
                     throw;
                   }
                   stop = true;
                   helper.join();
                   if (!helper_error.empty()) throw Error(helper_error);
                 });
               },
               {"from two threads at once"});
}

TEST_CASE("robustness: ranks disagreeing on a DTensor's placements (row 10)", "[robustness]") {
  // Rank 0 calls its [4, 8] block Shard(1), the others Shard(0): the global shapes agree ([16, 8]
  // and [4, 32] differ, so the global shape is given), the all_gathers have equal sizes.
  const auto inconsistent = [](const DeviceMesh& mesh) {
    const bool first = mesh.get_coordinate()->at(0) == 0;
    FromLocalOptions options;
    options.shape = Shape{16, 8};
    options.stride = Shape{8, 1};
    const Tensor local = first ? ones({16, 2}) : ones({4, 8});
    return DTensor::from_local(local, mesh, {first ? Shard(1) : Shard(0)}, options);
  };
  expect_success("from_local S(1) on rank 0 and S(0) on the others, then full_tensor", [&] {
    every_rank_raises(
        [&](const DeviceMesh& mesh) { (void)(inconsistent(mesh) * 2.0).full_tensor(); },
        "issued it for different operations");
  });
  expect_success("the same DTensor redistributed to Replicate", [&] {
    every_rank_raises(
        [&](const DeviceMesh& mesh) { (void)inconsistent(mesh).redistribute({Replicate()}); },
        "from [S(1)] to [R] (rank 0); redistribute of a float32 DTensor of shape [16, 8] from "
        "[S(0)]");
  });
  expect_success("a collective outside any DTensor op facing a redistribute", [&] {
    every_rank_raises(
        [&](const DeviceMesh& mesh) {
          const DTensor d = distribute_tensor(ones({16, 8}), mesh, {Shard(0)});
          if (mesh.get_coordinate()->at(0) == 0) {
            Tensor out = empty({16, 8});
            mesh.get_group(0)->all_gather_into_tensor(out, d.to_local())->wait();
          } else {
            (void)d.full_tensor();
          }
        },
        "a collective outside any DTensor op (rank 0)");
  });
}

TEST_CASE("robustness: a rank skipping a DTensor op's collective is named at once (issue 62)",
          "[robustness]") {
  // full_tensor() on rank 0 only, the others going on to a world barrier: rank 0 waits in an
  // all_gather for rank 1, which waits for it at the barrier, as do ranks 2 and 3. The timeout
  // is 60 s; the deadlock is said within seconds, naming the DTensor op.
  expect_success("full_tensor on rank 0 only", [] {
    std::atomic<int> named{0};
    std::mutex mutex;
    std::string other;
    const auto start = std::chrono::steady_clock::now();
    dist::run_threads(
        4,
        [&](dist::ProcessGroupPtr world) {
          const DeviceMesh mesh(DeviceType::CPU, {2, 2}, {"dp", "tp"});
          const DTensor d = distribute_tensor(ones({8, 8}), mesh, {Shard(0), Shard(1)});
          try {
            if (world->rank() == 0) {
              (void)d.full_tensor();
            } else {
              world->barrier();
            }
          } catch (const CommError& e) {
            const std::string m = e.what();
            if (m.find("deadlock") != std::string::npos &&
                m.find("rank 0 is in all_gather_into_tensor (redistribute of a float32 DTensor "
                       "of shape [8, 8]") != std::string::npos &&
                m.find("rank 2 is in barrier") != std::string::npos) {
              ++named;
              return;
            }
            std::lock_guard<std::mutex> lock(mutex);
            other = m;
          }
        },
        {.timeout = std::chrono::seconds(60)});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (named.load() != 4 || seconds > 10) {
      throw std::logic_error(std::to_string(named.load()) + " of 4 ranks named the deadlock in " +
                             std::to_string(seconds) + " s; another message: " + other);
    }
  });
}

}  // namespace
}  // namespace tessera::robustness_test
