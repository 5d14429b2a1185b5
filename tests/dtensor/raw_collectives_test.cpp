// The raw collectives behind redistribute plans (dtensor/debug/raw_collectives.h, the explorer's
// and the benchmarks' baseline) over the redistribute property test's placement pairs, uneven
// and empty dims included: every rank must pass buffers of one size, or the threads backend
// raises (issue 62: every uneven Shard -> Shard transition failed on 2 to 4 ranks).

#include "tessera/dtensor/debug/raw_collectives.h"

#include <catch2/catch.hpp>

#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

bool has_partial_target(const Placements& ps) {
  return std::any_of(ps.begin(), ps.end(), [](const Placement& p) { return p.is_partial(); });
}

void run_all_pairs(const Shape& mesh_shape, const std::vector<Shape>& shapes) {
  on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
    std::vector<std::string> failures;
    int64_t steps = 0;
    for (const Shape& shape : shapes) {
      const std::vector<Placements> lists =
          all_placement_lists(mesh.ndim(), static_cast<int64_t>(shape.size()));
      for (const Placements& from : lists) {
        const DTensorSpec src{mesh, from, shape, contiguous_strides(shape), kFloat32};
        for (const Placements& to : lists) {
          if (has_partial_target(to)) continue;  // users cannot ask for Partial
          const auto& plan = dtensor::plan_redistribute(src, to);
          try {
            for (const auto& collective : debug::raw_collectives(src, plan)) {
              collective();
              ++steps;
            }
          } catch (const Error& e) {
            failures.push_back(
                fmt::format("{} {} -> {}: {}", shape, to_string(from), to_string(to), e.what()));
            if (failures.size() >= 5) return failures;
          }
        }
      }
    }
    if (steps == 0) failures.push_back("no plan had a collective");
    return failures;
  });
}

const std::vector<Shape> kShapes{{7}, {5, 5}, {6, 5}, {5, 7}, {0, 3}, {3, 1, 5}};

TEST_CASE("raw collectives: one buffer size on every rank, mesh 2", "[dtensor][raw]") {
  run_all_pairs({2}, kShapes);
}
TEST_CASE("raw collectives: one buffer size on every rank, mesh 3", "[dtensor][raw]") {
  run_all_pairs({3}, kShapes);
}
TEST_CASE("raw collectives: one buffer size on every rank, mesh 4", "[dtensor][raw]") {
  run_all_pairs({4}, kShapes);
}
TEST_CASE("raw collectives: one buffer size on every rank, mesh 2x2", "[dtensor][raw]") {
  run_all_pairs({2, 2}, {{7}, {5, 7}, {5, 5}});
}

}  // namespace
}  // namespace tessera::dtensor_test
