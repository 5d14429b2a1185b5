// The redistribute property test on the mpi backend. Hidden from plain runs: ctest starts it as
// `mpirun -n 4 dtensor_tests "[mpi]"` (tests/dtensor/mpi_tests.cmake); every rank runs the same
// cases in the same order.

#include <catch2/catch.hpp>
#include <iostream>

#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

using namespace std::chrono_literals;

dist::ProcessGroupPtr mpi_world() {
  static const dist::ProcessGroupPtr world =
      dist::init_process_group({.backend = "mpi", .timeout = 120s, .check = true});
  return world;
}

// Every pair with StridedShard placements too on the 1-D mesh; every 11th of those on 2x2 (the
// plain pairs stay exhaustive), as the threads backend's property test.
void check_on(const Shape& mesh_shape, const std::vector<Shape>& shapes, int64_t strided_stride) {
  REQUIRE(mpi_world()->size() == mesh_shape.numel());
  const DeviceMesh mesh(DeviceType::CPU, mesh_shape);
  PairCount count;
  const std::vector<std::string> failures =
      check_all_pairs(mesh, shapes, &count, {.strided = true, .strided_stride = strided_stride});
  INFO("rank " << mpi_world()->rank() << ", mesh " << mesh_shape << ": " << count.pairs
               << " pairs, " << count.strided_pairs << " with a StridedShard");
  CHECK(count.pairs > 0);
  CHECK(count.strided_pairs > 0);
  for (const std::string& f : failures) FAIL_CHECK(f);
  if (mpi_world()->rank() == 0) {
    std::cout << "mpi redistribute property, mesh " << mesh_shape << ": " << count.pairs
              << " ordered pairs, " << count.strided_pairs << " of them with a StridedShard\n";
  }
}

TEST_CASE("mpi: redistribute property on a 1-D mesh of 4", "[.mpi]") {
  check_on({4}, {{7}, {5, 3}}, 1);
}

TEST_CASE("mpi: redistribute property on a 2x2 mesh", "[.mpi]") {
  check_on({2, 2}, {{7}, {3, 1, 5}}, 11);
}

}  // namespace
}  // namespace tessera::dtensor_test
