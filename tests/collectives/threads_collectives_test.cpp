// The threads backend against the single-process reference, world sizes 1 to 4.

#include <algorithm>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "tests/collectives/collective_cases.h"

namespace dist = tessera::dist;
using namespace std::chrono_literals;

TEST_CASE("threads: every collective x op x dtype matches the reference",
          "[collectives][threads]") {
  for (int n : {1, 2, 3, 4}) {
    std::vector<std::vector<std::string>> failures(static_cast<size_t>(n));
    dist::run_threads(n,
                      [&](dist::ProcessGroupPtr pg) {
                        failures[static_cast<size_t>(pg->rank())] =
                            coll_test::check_everything(pg, true);
                      },
                      {.timeout = 60s});
    for (const auto& rank_failures : failures) {
      INFO("world size " << n);
      for (const auto& f : rank_failures) FAIL_CHECK(f);
    }
  }
}

TEST_CASE("threads: run_threads gives each rank its world and a share of the cores",
          "[collectives][threads]") {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  std::mutex mutex;
  std::vector<int> threads;
  std::vector<bool> world_is_group;
  std::vector<std::string> backends;
  dist::run_threads(3, [&](dist::ProcessGroupPtr pg) {
    std::lock_guard lock(mutex);
    threads.push_back(tessera::get_num_threads());
    world_is_group.push_back(dist::world() == pg && dist::is_initialized());
    backends.emplace_back(pg->backend_name());
  });
  CHECK(threads == std::vector<int>(3, std::max(1, hardware / 3)));
  CHECK(world_is_group == std::vector<bool>(3, true));
  CHECK(backends == std::vector<std::string>(3, "threads"));
  CHECK_THROWS_WITH(dist::run_threads(0, [](dist::ProcessGroupPtr) {}),
                    Catch::Contains("[run_threads]") && Catch::Contains("at least 1"));
}

TEST_CASE("threads: observers are per rank", "[collectives][threads]") {
  std::vector<int> counts(2, 0);
  dist::run_threads(2, [&](dist::ProcessGroupPtr pg) {
    int seen = 0;
    std::optional<dist::CollectiveObserverGuard> guard;
    if (pg->rank() == 0) guard.emplace([&](const dist::CollectiveEvent&) { ++seen; });
    tessera::Tensor t = coll_test::filled(tessera::kFloat32, {4}, pg->rank());
    pg->all_reduce(t);
    pg->broadcast(t, 1);
    counts[static_cast<size_t>(pg->rank())] = seen;
  });
  CHECK(counts == std::vector<int>{2, 0});
}

// float16 reductions accumulate in float and round once (Note in local_kernels.h), whether they
// convert with F16C or in software: every bit pattern on every rank, against tessera::Half's own
// conversions in rank order. NaN results need only be NaN (payloads may differ).
TEST_CASE("threads: float16 reductions round once at every value", "[collectives][threads]") {
  using tessera::Half;
  constexpr int kPatterns = 1 << 16;
  const auto pattern = [](int rank, int i) {
    return static_cast<uint16_t>((i * (2 * rank + 1) + rank * 12345) & 0xffff);
  };
  const auto is_nan = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; };
  for (int n : {2, 3, 5}) {
    for (dist::ReduceOp op :
         {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max, dist::ReduceOp::Min}) {
      std::vector<uint16_t> got(kPatterns);
      dist::run_threads(n, [&](dist::ProcessGroupPtr pg) {
        tessera::Tensor t = tessera::empty({kPatterns}, tessera::kFloat16);
        Half* p = t.data_ptr<Half>();
        for (int i = 0; i < kPatterns; ++i) p[i] = Half::from_bits(pattern(pg->rank(), i));
        pg->all_reduce(t, op)->wait();
        if (pg->rank() == 0) {
          for (int i = 0; i < kPatterns; ++i) got[static_cast<size_t>(i)] = p[i].bits;
        }
      });
      int wrong = 0;
      for (int i = 0; i < kPatterns; ++i) {
        float acc = Half::from_bits(pattern(0, i));
        for (int r = 1; r < n; ++r) {
          const float v = Half::from_bits(pattern(r, i));
          if (op == dist::ReduceOp::Sum || op == dist::ReduceOp::Avg) acc = acc + v;
          if (op == dist::ReduceOp::Max) acc = (v > acc || v != v) ? v : acc;
          if (op == dist::ReduceOp::Min) acc = (v < acc || v != v) ? v : acc;
        }
        if (op == dist::ReduceOp::Avg) acc = acc / static_cast<float>(n);
        const uint16_t want = Half(acc).bits;
        const uint16_t have = got[static_cast<size_t>(i)];
        if (is_nan(want) ? !is_nan(have) : have != want) {
          if (++wrong <= 5) {
            FAIL_CHECK("world " << n << ", " << dist::reduce_op_name(op) << ", element " << i
                                << ": got 0x" << std::hex << have << ", want 0x" << want);
          }
        }
      }
      CHECK(wrong == 0);
    }
  }
}
