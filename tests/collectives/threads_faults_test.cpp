// Failures on the threads backend: a rank that throws, leaves or is late; arguments rejected
// before anything is communicated; backends a build lacks.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "tests/collectives/collective_checks.h"

namespace dist = tessera::dist;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using coll_test::empty;
using coll_test::filled;
using tessera::kFloat32;
using tessera::Tensor;

namespace {

// What each rank saw: the CommError message of its failed collective and how long it waited.
struct Outcome {
  std::string message;
  double seconds = -1;
};

// Runs `collective` and records the CommError it must raise.
void expect_comm_error(Outcome& outcome, const std::function<void()>& collective) {
  const auto start = Clock::now();
  try {
    collective();
    outcome.message = "no error";
  } catch (const tessera::CommError& e) {
    outcome.message = e.what();
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("threads: a rank that throws fails its peers' collectives and run_threads rethrows",
          "[collectives][threads][faults]") {
  std::vector<Outcome> pending(4);
  std::vector<Outcome> next(4);
  const auto job = [&](dist::ProcessGroupPtr pg) {
    const int r = pg->rank();
    Tensor t = filled(kFloat32, {1000}, r);
    pg->all_reduce(t);
    if (r == 2) {
      std::this_thread::sleep_for(100ms);  // the others are waiting by now
      throw std::runtime_error("rank 2 gives up");
    }
    // Pending: an async collective rank 2 never joins; next: one issued after the failure.
    auto work = pg->all_reduce(t, {.async_op = true});
    expect_comm_error(pending[static_cast<size_t>(r)], [&] { work->wait(); });
    expect_comm_error(next[static_cast<size_t>(r)], [&] { pg->barrier(); });
  };
  // A long timeout: only the failure may wake the peers.
  CHECK_THROWS_AS(dist::run_threads(4, job, {.timeout = 60s}), std::runtime_error);
  CHECK_THROWS_WITH(dist::run_threads(4, job, {.timeout = 60s}), "rank 2 gives up");
  for (int r : {0, 1, 3}) {
    INFO("rank " << r);
    CHECK_THAT(
        pending[static_cast<size_t>(r)].message,
        Catch::Contains("[all_reduce]") && Catch::Contains("rank 2 failed: rank 2 gives up"));
    CHECK(pending[static_cast<size_t>(r)].seconds < 2.0);
    CHECK_THAT(next[static_cast<size_t>(r)].message,
               Catch::Contains("[barrier]") && Catch::Contains("aborted"));
    CHECK(next[static_cast<size_t>(r)].seconds < 0.5);
  }
}

TEST_CASE("threads: a rank that returns early fails the collectives that wait for it",
          "[collectives][threads][faults]") {
  std::vector<Outcome> outcomes(3);
  const auto job = [&](dist::ProcessGroupPtr pg) {
    if (pg->rank() == 2) return;
    Tensor t = filled(kFloat32, {10}, pg->rank());
    expect_comm_error(outcomes[static_cast<size_t>(pg->rank())], [&] { pg->all_reduce(t); });
  };
  REQUIRE_NOTHROW(dist::run_threads(3, job, {.timeout = 60s}));
  for (int r : {0, 1}) {
    INFO("rank " << r);
    CHECK_THAT(outcomes[static_cast<size_t>(r)].message,
               Catch::Contains("rank 2") && Catch::Contains("left run_threads"));
    CHECK(outcomes[static_cast<size_t>(r)].seconds < 2.0);
  }
}

TEST_CASE("threads: collectives past their timeout fail on every rank",
          "[collectives][threads][faults]") {
  std::vector<Outcome> outcomes(2);
  dist::run_threads(2, [&](dist::ProcessGroupPtr pg) {
    Outcome& mine = outcomes[static_cast<size_t>(pg->rank())];
    Tensor t = filled(kFloat32, {10}, pg->rank());
    if (pg->rank() == 1) std::this_thread::sleep_for(300ms);
    expect_comm_error(mine, [&] { pg->all_reduce(t, {.timeout = 50ms}); });
  });
  CHECK_THAT(outcomes[0].message,
             Catch::Contains("timed out after 50 ms") && Catch::Contains("waiting for rank(s) 1"));
  CHECK(outcomes[0].seconds < 0.25);
  CHECK_THAT(outcomes[1].message, Catch::Contains("was aborted") && Catch::Contains("timed out"));

  // The group's default timeout, and point to point.
  std::vector<Outcome> p2p(2);
  dist::run_threads(2, [&](dist::ProcessGroupPtr pg) {
    pg->set_default_timeout(50ms);
    if (pg->rank() == 0) {
      expect_comm_error(p2p[0], [&] { pg->recv(empty(kFloat32, {4}), 1); });
    } else {
      std::this_thread::sleep_for(200ms);
      expect_comm_error(p2p[1], [&] { pg->barrier(); });
    }
  });
  CHECK_THAT(p2p[0].message, Catch::Contains("[recv] timed out after 50 ms") &&
                                 Catch::Contains("waiting for rank 1"));
  CHECK_THAT(p2p[1].message, Catch::Contains("[barrier]") && Catch::Contains("aborted"));
}

TEST_CASE("threads: bad arguments are rejected before communicating",
          "[collectives][threads][errors]") {
  dist::run_threads(1, [](dist::ProcessGroupPtr pg) {
    Tensor m = filled(kFloat32, {3, 4}, 0);
    CHECK_THROWS_WITH(pg->all_reduce(m.t()),
                      Catch::Contains("[all_reduce]") && Catch::Contains("contiguous"));
    CHECK_THROWS_AS(pg->all_reduce(Tensor()), tessera::Error);
    CHECK_THROWS_AS(pg->all_reduce(m, dist::ReduceOp::BXor), tessera::DTypeError);
    CHECK_THROWS_WITH(pg->all_reduce(filled(tessera::kInt64, {3}, 0), dist::ReduceOp::Avg),
                      Catch::Contains("[all_reduce]") && Catch::Contains("Avg"));
    CHECK_THROWS_WITH(pg->all_reduce(m, {.timeout = 0ms}), Catch::Contains("positive"));
    CHECK_THROWS_AS(pg->all_gather_into_tensor(empty(kFloat32, {5}), m), tessera::ShapeError);
    CHECK_THROWS_AS(pg->all_gather_into_tensor(empty(tessera::kInt64, {12}), m),
                    tessera::DTypeError);
    CHECK_THROWS_AS(pg->all_gather({}, m), tessera::ShapeError);
    CHECK_THROWS_AS(pg->reduce_scatter_tensor(empty(kFloat32, {5}), m), tessera::ShapeError);
    CHECK_THROWS_WITH(pg->all_to_all_single(empty(kFloat32, {3, 4}), m, {3}, {2}),
                      Catch::Contains("[all_to_all_single]") && Catch::Contains("in_splits"));
    CHECK_THROWS_AS(pg->all_to_all_single(empty(kFloat32, {3, 5}), m, {3}, {3}),
                    tessera::ShapeError);
    CHECK_THROWS_AS(pg->broadcast(m, 1), tessera::IndexError);
    CHECK_THROWS_AS(pg->scatter(m, {}, 0), tessera::ShapeError);
    CHECK_THROWS_WITH(pg->send(m, 0), Catch::Contains("itself"));
    CHECK_THROWS_AS(pg->split({1}), tessera::IndexError);
    CHECK_THROWS_WITH(pg->new_group({0, 0}), Catch::Contains("distinct"));
    CHECK_THROWS_AS(pg->set_default_timeout(-1ms), tessera::Error);
  });
}

TEST_CASE("threads: init_process_group picks a backend this build has",
          "[collectives][threads][init]") {
  // Without a GPU: NotSupportedError in a build without NCCL, DeviceError in one with it (on a GPU
  // machine "nccl" makes a world of one: tests/cuda/nccl_test.cpp).
  if (!tessera::cuda_is_available()) {
    CHECK_THROWS_AS(dist::init_process_group({.backend = "nccl"}), tessera::Error);
    CHECK_THROWS_WITH(dist::init_process_group({.backend = "nccl"}),
                      Catch::Contains("[init_process_group]") && Catch::Contains("nccl") &&
                          Catch::Contains("CUDA"));
  }
  CHECK_THROWS_WITH(dist::init_process_group({.backend = "gloo"}),
                    Catch::Contains("unknown backend") && Catch::Contains("\"mpi\""));
  CHECK_FALSE(dist::is_initialized());
  CHECK_THROWS_WITH(dist::world(), Catch::Contains("init_process_group"));

  dist::ProcessGroupPtr pg = dist::init_process_group({.backend = "auto"});
  CHECK(pg->backend_name() == "threads");
  CHECK(pg->size() == 1);
  CHECK(dist::world() == pg);
  CHECK_THROWS_WITH(dist::init_process_group(), Catch::Contains("already initialized"));
  Tensor t = filled(kFloat32, {4}, 0);
  pg->all_reduce(t, dist::ReduceOp::Avg);
  CHECK(t.to_vector<float>() == filled(kFloat32, {4}, 0).to_vector<float>());
  dist::destroy_process_group();
  CHECK_FALSE(dist::is_initialized());

  // Inside run_threads the rank's world is set and cannot be replaced.
  std::atomic<bool> refused{false};
  dist::run_threads(1, [&](dist::ProcessGroupPtr) {
    try {
      dist::init_process_group();
    } catch (const tessera::Error&) {
      refused = true;
    }
  });
  CHECK(refused);
}
