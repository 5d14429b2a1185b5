// The mpi backend in a build without MPI (see collectives/backends.h).

#include "tessera/collectives/backends.h"

namespace tessera::dist::detail {

bool mpi_built() { return false; }

ProcessGroupPtr make_mpi_world(const InitOptions&) {
  throw NotSupportedError(
      "[init_process_group] the \"mpi\" backend is not available: this build of Tessera was "
      "configured without MPI (TESSERA_MPI=OFF, or no MPI found); install Open MPI and configure "
      "with TESSERA_MPI=ON, or use \"threads\" (dist::run_threads)");
}

}  // namespace tessera::dist::detail
