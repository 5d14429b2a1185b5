#pragma once
// Helpers for the DTensor tests: running a body on a mesh of in-process ranks and collecting
// failures (Catch2 assertions are not thread-safe, so rank threads report strings).

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::dtensor_test {

// Runs body(mesh) on every rank of a fresh threads world shaped `mesh_shape`; failures (strings
// the body returns, or exceptions) are reported by the calling thread.
inline void on_mesh(const Shape& mesh_shape,
                    const std::function<std::vector<std::string>(const DeviceMesh&)>& body,
                    std::vector<std::string> dim_names = {}) {
  std::mutex mutex;
  std::vector<std::string> failures;
  dist::run_threads(static_cast<int>(mesh_shape.numel()), [&](dist::ProcessGroupPtr world) {
    const DeviceMesh mesh(DeviceType::CPU, mesh_shape, dim_names);
    std::vector<std::string> mine = body(mesh);
    std::lock_guard<std::mutex> lock(mutex);
    for (std::string& f : mine)
      failures.push_back("rank " + std::to_string(world->rank()) + ": " + f);
  });
  for (const std::string& f : failures) FAIL_CHECK(f);
}

// Whether the calling rank is the mesh's first (coordinate 0 along every mesh dim): the one rank
// that writes a figure its body shares with the test's thread. Any wider test (the first row of
// a 2-D mesh) lets two rank threads write it at once, a race ThreadSanitizer reports.
inline bool first_rank_of(const DeviceMesh& mesh) {
  const std::optional<std::vector<int64_t>> coordinate = mesh.get_coordinate();
  return coordinate &&
         std::all_of(coordinate->begin(), coordinate->end(), [](int64_t c) { return c == 0; });
}

}  // namespace tessera::dtensor_test
