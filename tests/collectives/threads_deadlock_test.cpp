// Deadlocks among rank threads (Note [Deadlocks among rank threads] in
// collectives/threads/rendezvous.h): ranks waiting for each other in collectives none can
// complete raise at once on every rank, naming what each waits in, not after the timeout; ranks
// that are only late, async collectives and the option's off switch are not taken for one.

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

struct Outcome {
  std::string message = "no error";
  double seconds = -1;
};

// Runs fn on `n` rank threads with a 60 s timeout; each rank's CommError, and how long it took.
std::vector<Outcome> run(int n, const std::function<void(dist::ProcessGroupPtr)>& fn,
                         bool detect = true) {
  std::vector<Outcome> outcomes(static_cast<size_t>(n));
  dist::run_threads(n,
                    [&](dist::ProcessGroupPtr world) {
                      Outcome& mine = outcomes[static_cast<size_t>(world->rank())];
                      const auto start = Clock::now();
                      try {
                        fn(world);
                      } catch (const tessera::CommError& e) {
                        mine.message = e.what();
                      }
                      mine.seconds = std::chrono::duration<double>(Clock::now() - start).count();
                    },
                    {.timeout = 60s, .detect_deadlocks = detect});
  return outcomes;
}

void expect_deadlock(const std::vector<Outcome>& outcomes,
                     const std::vector<std::string>& fragments) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    INFO("rank " << r << ": " << outcomes[r].message);
    CHECK_THAT(outcomes[r].message, Catch::Contains("deadlock"));
    for (const std::string& f : fragments) CHECK_THAT(outcomes[r].message, Catch::Contains(f));
    CHECK(outcomes[r].seconds < 10.0);  // the timeout is 60 s
  }
}

TEST_CASE("threads deadlock: a rank skipping a collective is named at once",
          "[collectives][threads][faults]") {
  // Rank 0 all_reduces on {0, 1} where the others barrier on the world: rank 0 waits for rank 1,
  // which waits for rank 0 at the world barrier, as do ranks 2 and 3.
  const auto outcomes = run(4, [](dist::ProcessGroupPtr world) {
    const dist::ProcessGroupPtr pair = world->new_group({0, 1});
    if (world->rank() == 0) {
      Tensor t = filled(kFloat32, {8}, 1);
      pair->all_reduce(t);
    } else {
      world->barrier();
    }
  });
  expect_deadlock(outcomes, {"rank 0 is in all_reduce on threads group [0, 1], waiting for "
                             "rank(s) 1",
                             "rank 1 is in barrier on threads group [0, 1, 2, 3], waiting for "
                             "rank(s) 0",
                             "rank 3 is in barrier"});
}

TEST_CASE("threads deadlock: two ranks receiving from each other first",
          "[collectives][threads][faults]") {
  const auto outcomes = run(2, [](dist::ProcessGroupPtr world) {
    const int peer = 1 - world->rank();
    world->recv(empty(kFloat32, {4}), peer)->wait();
    world->send(filled(kFloat32, {4}, 1), peer)->wait();
  });
  expect_deadlock(outcomes, {"rank 0 is in recv", "rank 1 is in recv"});
}

TEST_CASE("threads deadlock: late ranks and async collectives are not deadlocks",
          "[collectives][threads][faults]") {
  // Rank 1 computes for longer than the detection's grace before it arrives.
  auto outcomes = run(3, [](dist::ProcessGroupPtr world) {
    if (world->rank() == 1) std::this_thread::sleep_for(400ms);
    Tensor t = filled(kFloat32, {8}, world->rank());
    world->all_reduce(t);
  });
  for (const Outcome& o : outcomes) CHECK(o.message == "no error");
  // Rank 0 waits on an async all_reduce while rank 1 issues it late; rank 2 waits in a barrier
  // after its own.
  outcomes = run(3, [](dist::ProcessGroupPtr world) {
    Tensor t = filled(kFloat32, {8}, world->rank());
    if (world->rank() == 1) std::this_thread::sleep_for(300ms);
    dist::WorkPtr work = world->all_reduce(t, {.async_op = true});
    work->wait();
    world->barrier();
  });
  for (const Outcome& o : outcomes) CHECK(o.message == "no error");
}

TEST_CASE("threads deadlock: a user thread issuing for a rank is not taken for a deadlock",
          "[collectives][threads][faults]") {
  // Rank 0's main thread waits in an all_reduce on {0, 1} with rank 1, which first waits for
  // rank 0's own thread, late, on a group of their own: no deadlock, once detection is off.
  const auto outcomes = run(
      2,
      [](dist::ProcessGroupPtr world) {
        const dist::ProcessGroupPtr side = world->new_group({0, 1});
        Tensor a = filled(kFloat32, {8}, 1), b = filled(kFloat32, {8}, 2);
        if (world->rank() == 0) {
          std::thread user([&] {
            std::this_thread::sleep_for(400ms);
            side->all_reduce(b);
          });
          world->all_reduce(a);
          user.join();
        } else {
          side->all_reduce(b);
          world->all_reduce(a);
        }
      },
      /*detect=*/false);
  for (const Outcome& o : outcomes) CHECK(o.message == "no error");
}

}  // namespace
