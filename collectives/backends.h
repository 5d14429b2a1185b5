#pragma once
// Internal: how init_process_group reaches the backends. Optional backends are chosen by CMake
// between their sources and a seam that explains what is missing (mpi/no_mpi.cpp,
// nccl/no_nccl.cpp), never by #ifdef.

#include "tessera/collectives/dist.h"

namespace tessera::dist::detail {

bool mpi_built();
ProcessGroupPtr make_mpi_world(const InitOptions& options);
bool nccl_built();
ProcessGroupPtr make_nccl_world(const InitOptions& options);
// A single-rank threads world (init_process_group without a launcher).
ProcessGroupPtr make_threads_world(const InitOptions& options);

// Makes `world` the calling thread's dist::world() (run_threads ranks); nullptr clears it.
void set_thread_world(ProcessGroupPtr world);

}  // namespace tessera::dist::detail
