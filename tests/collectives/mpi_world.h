#pragma once
// The world of the "[.mpi]" test cases: one per process, shared by every case, with the default
// options (arguments checked across ranks) unless TESSERA_TEST_MPI_UNCHECKED=1 opts out (a
// second ctest entry covers the unchecked paths).

#include <chrono>
#include <cstdlib>

#include "tessera/tessera.h"

namespace coll_test {

inline bool mpi_checked() { return std::getenv("TESSERA_TEST_MPI_UNCHECKED") == nullptr; }

inline tessera::dist::ProcessGroupPtr mpi_world() {
  static const tessera::dist::ProcessGroupPtr world = [] {
    tessera::dist::InitOptions options{.backend = "mpi", .timeout = std::chrono::seconds(120)};
    if (!mpi_checked()) options.check = false;
    return tessera::dist::init_process_group(options);
  }();
  return world;
}

}  // namespace coll_test
