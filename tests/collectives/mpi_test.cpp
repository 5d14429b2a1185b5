// The mpi backend against the single-process reference. Hidden from plain runs: ctest starts it
// as `mpirun -n N collectives_tests "[mpi]"` (tests/collectives/mpi_tests.cmake), and every rank
// runs the same test cases in the same order.

#include <catch2/catch.hpp>

#include "tests/collectives/collective_cases.h"
#include "tests/collectives/mpi_world.h"
#include "tests/collectives/strided_cases.h"

namespace dist = tessera::dist;
using coll_test::mpi_checked;
using coll_test::mpi_world;

TEST_CASE("mpi: every collective x op x dtype matches the reference", "[.mpi]") {
  const dist::ProcessGroupPtr pg = mpi_world();
  REQUIRE(pg->backend_name() == "mpi");
  REQUIRE(dist::world() == pg);
  INFO("rank " << pg->rank() << " of " << pg->size());
  for (const auto& f : coll_test::check_everything(pg, mpi_checked())) FAIL_CHECK(f);
}

TEST_CASE("mpi: strided views are staged through contiguous buffers", "[.mpi]") {
  const dist::ProcessGroupPtr pg = mpi_world();
  INFO("rank " << pg->rank() << " of " << pg->size());
  for (const auto& f : coll_test::check_strided_collectives(pg, 3, 2)) FAIL_CHECK(f);
  for (const auto& f : coll_test::check_strided_collectives(pg, 2601, 13)) FAIL_CHECK(f);
}

TEST_CASE("mpi: auto picks mpi under mpirun and nccl is refused", "[.mpi]") {
  const dist::ProcessGroupPtr first = mpi_world();
  CHECK_THROWS_WITH(dist::init_process_group(), Catch::Contains("already initialized"));
  dist::destroy_process_group();
  // NotSupportedError without NCCL in the build, DeviceError without a GPU on the machine.
  CHECK_THROWS_WITH(dist::init_process_group({.backend = "nccl"}),
                    Catch::Contains("[init_process_group]") && Catch::Contains("nccl"));
  const dist::ProcessGroupPtr pg = dist::init_process_group({.backend = "auto"});
  CHECK(pg->backend_name() == "mpi");
  CHECK(pg->size() == first->size());
  CHECK(dist::world() == pg);
  tessera::Tensor t = coll_test::filled(tessera::kFloat32, {3}, pg->rank());
  pg->all_reduce(t, dist::ReduceOp::Max);
  first->barrier();  // the first world stays usable while its owners hold it
}
