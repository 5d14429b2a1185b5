// Ranks that disagree on the mpi backend with default options (issue 21, rows 8 and 13b): every
// rank raises the same Error, nothing hangs, and the group stays usable. Each case runs at a small
// size (through shared memory on one machine), a large one (through MPI) and with one rank on
// each path; the ctest entry with TESSERA_MPI_SHARED_MEMORY=0 runs them all through MPI.

#include <catch2/catch.hpp>

#include "tests/collectives/collective_cases.h"
#include "tests/collectives/mpi_world.h"

namespace dist = tessera::dist;
using coll_test::Checker;
using coll_test::empty;
using coll_test::filled;
using dist::ReduceOp;
using tessera::kFloat32;
using tessera::Tensor;

namespace {

// Through shared memory on one machine / above every shared-memory limit (256 KiB).
constexpr int64_t kSmall = 6;
constexpr int64_t kLarge = 100000;

// After a disagreement, the group still computes right (and every rank is still in step).
void expect_usable(Checker& c, const std::string& after) {
  const size_t before = c.failures().size();
  coll_test::check_all_reduce(c, kFloat32, ReduceOp::Sum, {kSmall}, false);
  coll_test::check_all_reduce(c, kFloat32, ReduceOp::Max, {kLarge}, false);
  c.expect(c.failures().size() == before, "the group computes wrong after " + after);
}

void check_collective_disagreements(Checker& c) {
  const int r = c.rank();
  const int n = c.size();
  const bool odd = r == 1;  // the rank that disagrees
  for (const auto& [mine, other] : {std::pair{kSmall, kSmall}, std::pair{kLarge, kLarge},
                                    std::pair{kSmall, kLarge}, std::pair{kLarge, kSmall}}) {
    const int64_t m = odd ? other : mine;
    const std::string at = fmt::format(" ({} elements, rank 1: {})", mine, other);
    const std::string sizes = fmt::format("rank 0: {}", mine);

    if (mine != other) {
      c.expect_throws<tessera::ShapeError>(
          [&] { c.pg().all_reduce(filled(kFloat32, {m}, r)); },
          {"[all_reduce]", "number of elements", sizes, fmt::format("rank 1: {}", other)},
          "all_reduce of disagreeing sizes" + at);
      c.expect_throws<tessera::ShapeError>([&] { c.pg().broadcast(filled(kFloat32, {m}, r), 0); },
                                           {"[broadcast]", "number of elements", sizes},
                                           "broadcast of disagreeing sizes" + at);
      Tensor out = empty(kFloat32, {n * m});
      c.expect_throws<tessera::ShapeError>(
          [&] { c.pg().all_gather_into_tensor(out, filled(kFloat32, {m}, r)); },
          {"[all_gather_into_tensor]", "number of elements"},
          "all_gather_into_tensor of disagreeing sizes" + at);
      expect_usable(c, "disagreeing sizes" + at);
      continue;
    }
    c.expect_throws<tessera::DTypeError>(
        [&] { c.pg().all_reduce(filled(odd ? tessera::kInt64 : kFloat32, {m}, r)); },
        {"[all_reduce]", "dtype", "rank 0: float32", "rank 1: int64"},
        "all_reduce of disagreeing dtypes" + at);
    c.expect_throws<tessera::Error>(
        [&] { c.pg().all_reduce(filled(kFloat32, {m}, r), odd ? ReduceOp::Max : ReduceOp::Sum); },
        {"[all_reduce]", "reduce op", "rank 0: sum", "rank 1: max"},
        "all_reduce of disagreeing reduce ops" + at);
    c.expect_throws<tessera::Error>(
        [&] { c.pg().broadcast(filled(kFloat32, {m}, r), odd ? n - 1 : 0); },
        {"[broadcast]", "root", "rank 0: 0", fmt::format("rank 1: {}", n - 1)},
        "broadcast of disagreeing roots" + at);
    c.expect_throws<tessera::Error>(
        [&] {
          if (odd) {
            c.pg().barrier();
          } else {
            c.pg().all_reduce(filled(kFloat32, {m}, r));
          }
        },
        {"issued different collectives", "rank 0: all_reduce", "rank 1: barrier"},
        "barrier against all_reduce" + at);
    Tensor scattered = empty(kFloat32, {n * m});
    c.expect_throws<tessera::Error>(
        [&] {
          if (odd) {
            c.pg().all_reduce(filled(kFloat32, {m}, r));
          } else {
            c.pg().reduce_scatter_tensor(scattered.narrow(0, 0, m), filled(kFloat32, {n * m}, r));
          }
        },
        {"issued different collectives", "rank 1: all_reduce"},
        "reduce_scatter_tensor against all_reduce" + at);
    expect_usable(c, "disagreements" + at);
  }
}

// Per-rank counts that differ legitimately (all_to_all_single, scatter, gather, all_gather) are
// checked by the fingerprint's balance: a single wrong count must raise.
void check_count_disagreements(Checker& c) {
  const int r = c.rank();
  const int n = c.size();
  // Rank 0 sends 2 rows to rank 1, which expects 3 from it; everything else is 1 row.
  std::vector<int64_t> in_splits(static_cast<size_t>(n), 1);
  std::vector<int64_t> out_splits(static_cast<size_t>(n), 1);
  if (r == 0) in_splits[1] = 2;
  if (r == 1) out_splits[0] = 3;
  const auto rows = [](const std::vector<int64_t>& s) {
    return std::accumulate(s.begin(), s.end(), int64_t{0});
  };
  Tensor out = empty(kFloat32, {rows(out_splits), 4});
  c.expect_throws<tessera::ShapeError>(
      [&] {
        c.pg().all_to_all_single(out, filled(kFloat32, {rows(in_splits), 4}, r), out_splits,
                                 in_splits);
      },
      {"[all_to_all_single]", "rank 0", "sends 8 elements to rank 1", "expects 12"},
      "all_to_all_single of disagreeing splits");

  // The root scatters 5 elements to rank 1, which receives 4.
  std::vector<Tensor> ins;
  for (int q = 0; q < n; ++q) ins.push_back(filled(kFloat32, {q == 1 ? 5 : 4}, q));
  c.expect_throws<tessera::ShapeError>(
      [&] { c.pg().scatter(empty(kFloat32, {4}), r == 0 ? ins : std::vector<Tensor>{}, 0); },
      {"[scatter]", "sends 5 elements to rank 1", "receives 4"}, "scatter of disagreeing sizes");

  // Rank 1 gathers 3 elements to the root, which expects 4 from it.
  std::vector<Tensor> outs;
  for (int q = 0; q < n; ++q) outs.push_back(empty(kFloat32, {4}));
  c.expect_throws<tessera::ShapeError>(
      [&] {
        c.pg().gather(filled(kFloat32, {r == 1 ? 3 : 4}, r), r == 0 ? outs : std::vector<Tensor>{},
                      0);
      },
      {"[gather]", "rank 1", "sends 3 elements", "expects 4"}, "gather of disagreeing sizes");
  expect_usable(c, "disagreeing counts");
}

}  // namespace

TEST_CASE("mpi: disagreeing ranks raise on every rank with default options", "[.mpi]") {
  REQUIRE(dist::InitOptions{}.check);
  const dist::ProcessGroupPtr pg = coll_test::mpi_world();
  INFO("rank " << pg->rank() << " of " << pg->size());
  if (!coll_test::mpi_checked() || pg->size() < 2) return;  // unchecked: undefined by contract
  Checker c(pg);
  check_collective_disagreements(c);
  check_count_disagreements(c);
  // A split facing a collective is a disagreement like any other.
  c.expect_throws<tessera::Error>(
      [&] {
        if (pg->rank() == 1) {
          pg->split({pg->rank()});
        } else {
          pg->all_reduce(filled(kFloat32, {kSmall}, pg->rank()));
        }
      },
      {"issued different collectives", "rank 1: split"}, "split against all_reduce");
  expect_usable(c, "split against all_reduce");
  for (const auto& f : c.failures()) FAIL_CHECK(f);
}

TEST_CASE("mpi: a send larger than its recv raises on both sides with both sizes", "[.mpi]") {
  const dist::ProcessGroupPtr pg = coll_test::mpi_world();
  INFO("rank " << pg->rank() << " of " << pg->size());
  if (!coll_test::mpi_checked() || pg->size() < 2) return;
  Checker c(pg);
  const int r = c.rank();
  if (r < 2) {
    for (const auto& sizes :
         {std::pair<int64_t, int64_t>{8, 4}, std::pair<int64_t, int64_t>{4, 8}}) {
      const int64_t sent = sizes.first;
      const int64_t received = sizes.second;
      const std::string what = fmt::format("send of {} into a recv of {}", sent, received);
      c.expect_throws<tessera::ShapeError>(
          [&] {
            if (r == 0) {
              c.pg().send(filled(kFloat32, {sent}, r), 1);
            } else {
              c.pg().recv(empty(kFloat32, {received}), 0, {.async_op = true})->wait();
            }
          },
          {r == 0 ? "[send]" : "[recv]", fmt::format("rank 0 of {}", pg->describe()),
           fmt::format("sends {} elements", sent), fmt::format("rank 1 receives {}", received)},
          what);
    }
    // The pair still works.
    if (r == 0) {
      c.pg().send(filled(kFloat32, {4}, 0), 1);
    } else {
      Tensor got = empty(kFloat32, {4});
      c.pg().recv(got, 0);
      c.expect_values(got, coll_test::read(filled(kFloat32, {4}, 0)), "send/recv after");
    }
  }
  expect_usable(c, "send/recv of disagreeing sizes");
  for (const auto& f : c.failures()) FAIL_CHECK(f);
}
