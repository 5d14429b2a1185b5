// Exhaustive redistribute property test on the threads backend: for every ordered pair of
// placement lists drawn from {R, S(d), P(sum), P(max), P(avg)} per mesh dim, on several meshes and
// tensors of rank 1 to 3 (even, uneven and empty dims), full_tensor() after redistribute equals
// the single-device reference exactly. Data are integer-valued float64, so that reductions are
// exact too; Partial sources are built by splitting the reference into per-rank parts whose
// reduction is the reference.

#include <catch2/catch.hpp>
#include <functional>

#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

void run_property(const Shape& mesh_shape, const std::vector<Shape>& shapes) {
  int64_t pairs = 0;
  on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
    int64_t mine = 0;
    auto failures = check_all_pairs(mesh, shapes, &mine);
    if (mesh.get_coordinate()->at(0) == 0) pairs = mine;
    return failures;
  });
  INFO("mesh " << mesh_shape << ": " << pairs << " ordered pairs");
  CHECK(pairs > 0);
}

const std::vector<Shape> kShapes{{7}, {8}, {0}, {5, 3}, {4, 4}, {3, 1, 5}, {2, 0, 3}};

TEST_CASE("redistribute property: mesh 1", "[dtensor][redistribute][property]") {
  run_property({1}, kShapes);
}
TEST_CASE("redistribute property: mesh 4", "[dtensor][redistribute][property]") {
  run_property({4}, kShapes);
}
TEST_CASE("redistribute property: mesh 2x2", "[dtensor][redistribute][property]") {
  run_property({2, 2}, kShapes);
}
TEST_CASE("redistribute property: mesh 2x3", "[dtensor][redistribute][property]") {
  run_property({2, 3}, kShapes);
}
// One case per tensor rank: the rank-3 one alone makes ~90k pairs on 8 rank threads.
TEST_CASE("redistribute property: mesh 2x2x2 ranks 1-2", "[dtensor][redistribute][property]") {
  run_property({2, 2, 2}, {{7}, {5, 3}});
}
TEST_CASE("redistribute property: mesh 2x2x2 rank 3", "[dtensor][redistribute][property]") {
  run_property({2, 2, 2}, {{3, 1, 5}});
}

}  // namespace
}  // namespace tessera::dtensor_test
