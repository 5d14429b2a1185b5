// The nccl backend in a build without CUDA and NCCL (see collectives/backends.h and
// collectives/nccl/nccl.h).

#include "tessera/collectives/backends.h"
#include "tessera/collectives/nccl/nccl.h"

namespace tessera::dist::detail {

bool nccl_built() { return false; }

ProcessGroupPtr make_nccl_world(const InitOptions&) {
  throw NotSupportedError(
      "[init_process_group] the \"nccl\" backend is not available: this build of Tessera has no "
      "NCCL backend (it needs the CUDA path, TESSERA_CUDA=ON with the CUDA toolkit, and NCCL); "
      "use \"mpi\" for multi-process CPU jobs or \"threads\" (dist::run_threads)");
}

}  // namespace tessera::dist::detail

namespace tessera::dist {

ProcessGroupPtr new_nccl_group(const ProcessGroupPtr&, std::optional<int>) {
  throw NotSupportedError(
      "[new_nccl_group] this build of Tessera has no NCCL backend (it needs the CUDA path, "
      "TESSERA_CUDA=ON with the CUDA toolkit, and NCCL); use the threads group itself");
}

}  // namespace tessera::dist
