// The redistribute property test on the mpi backend. Hidden from plain runs: ctest starts it as
// `mpirun -n 4 dtensor_tests "[mpi]"` (tests/dtensor/mpi_tests.cmake); every rank runs the same
// cases in the same order.

#include <catch2/catch.hpp>

#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

using namespace std::chrono_literals;

dist::ProcessGroupPtr mpi_world() {
  static const dist::ProcessGroupPtr world =
      dist::init_process_group({.backend = "mpi", .timeout = 120s, .check = true});
  return world;
}

void check_on(const Shape& mesh_shape, const std::vector<Shape>& shapes) {
  REQUIRE(mpi_world()->size() == mesh_shape.numel());
  const DeviceMesh mesh(DeviceType::CPU, mesh_shape);
  int64_t pairs = 0;
  const std::vector<std::string> failures = check_all_pairs(mesh, shapes, &pairs);
  INFO("rank " << mpi_world()->rank() << ", mesh " << mesh_shape << ": " << pairs << " pairs");
  CHECK(pairs > 0);
  for (const std::string& f : failures) FAIL_CHECK(f);
}

TEST_CASE("mpi: redistribute property on a 1-D mesh of 4", "[.mpi]") {
  check_on({4}, {{7}, {5, 3}});
}

TEST_CASE("mpi: redistribute property on a 2x2 mesh", "[.mpi]") {
  check_on({2, 2}, {{7}, {3, 1, 5}});
}

}  // namespace
}  // namespace tessera::dtensor_test
