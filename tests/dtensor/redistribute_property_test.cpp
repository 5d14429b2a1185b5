// Exhaustive redistribute property test on the threads backend: for every ordered pair of
// placement lists drawn from {R, S(d), P(sum), P(max), P(avg)} per mesh dim, on several meshes and
// tensors of rank 1 to 3 (even, uneven and empty dims), full_tensor() after redistribute equals
// the single-device reference exactly, and every rank's local block is the one an independent
// reference (tests/dtensor/sharding_reference.h) computes from the torch documentation's
// definitions. Pairs with a StridedShard(d, 2) or StridedShard(d, 3) on any mesh dim, as source or
// as target, are drawn too: all of them on 1-D meshes, every k-th on larger ones (k printed).
// Data are integer-valued float64, so that reductions are exact too; Partial sources are built by
// splitting the reference into per-rank parts whose reduction is the reference.

#include <catch2/catch.hpp>
#include <functional>
#include <iostream>

#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

// Sanitized builds run 10-20x slower (the 2x2x2 rank-3 case alone took 14 minutes under asan on
// a loaded 2-core machine): they draw every 11th plain pair and 17 times fewer of the
// StridedShard ones (both primes to every list count), and say so. Release builds run every plain
// pair.
#ifdef TESSERA_TEST_UNDER_SANITIZER
constexpr int64_t kSanitizerThinning = 17;
constexpr int64_t kSanitizerPlainStride = 11;
#else
constexpr int64_t kSanitizerThinning = 1;
constexpr int64_t kSanitizerPlainStride = 1;
#endif

void run_property(const Shape& mesh_shape, const std::vector<Shape>& shapes,
                  int64_t strided_stride) {
  const PairDraw draw{.strided = true,
                      .strided_stride = strided_stride * kSanitizerThinning,
                      .plain_stride = kSanitizerPlainStride};
  PairCount count;
  on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
    PairCount mine;
    auto failures = check_all_pairs(mesh, shapes, &mine, draw);
    if (first_rank_of(mesh)) count = mine;
    return failures;
  });
  std::cout << "redistribute property, mesh " << mesh_shape << ": " << count.pairs
            << " ordered pairs, " << count.strided_pairs << " of them with a StridedShard (every "
            << draw.strided_stride << "; every " << draw.plain_stride << " of the others)\n";
  INFO("mesh " << mesh_shape << ": " << count.pairs << " ordered pairs");
  CHECK(count.pairs > 0);
  CHECK(count.strided_pairs > 0);
}

const std::vector<Shape> kShapes{{7}, {8}, {0}, {5, 3}, {4, 4}, {3, 1, 5}, {2, 0, 3}};

TEST_CASE("redistribute property: mesh 1", "[dtensor][redistribute][property]") {
  run_property({1}, kShapes, 1);
}
TEST_CASE("redistribute property: mesh 4", "[dtensor][redistribute][property]") {
  run_property({4}, kShapes, 1);
}
TEST_CASE("redistribute property: mesh 2x2", "[dtensor][redistribute][property]") {
  run_property({2, 2}, kShapes, 1);
}
TEST_CASE("redistribute property: mesh 2x3", "[dtensor][redistribute][property]") {
  run_property({2, 3}, kShapes, 1);
}
// One case per tensor rank: the rank-3 one alone makes ~90k plain pairs on 8 rank threads.
TEST_CASE("redistribute property: mesh 2x2x2 ranks 1-2", "[dtensor][redistribute][property]") {
  run_property({2, 2, 2}, {{7}, {5, 3}}, 29);
}
TEST_CASE("redistribute property: mesh 2x2x2 rank 3", "[dtensor][redistribute][property]") {
  run_property({2, 2, 2}, {{3, 1, 5}}, 997);
}

}  // namespace
}  // namespace tessera::dtensor_test
