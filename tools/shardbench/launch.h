#pragma once
// tessera-shardbench measures its strategies on rank threads of one process (--ranks). Started
// by an MPI launcher it would otherwise run as many independent copies as processes, each
// printing its own table: the launcher's rank 0 runs it alone and says so, the other processes
// exit at once.

#include "tessera/collectives/dist.h"

namespace tessera::shardbench {

// Whether this process runs the benchmark: false in a launched process other than rank 0. Rank 0
// of a launched job of several processes prints, once, that it runs alone.
bool runs_in_this_process();

// The options of every run_threads of the benchmark: no run_threads warning under a launcher,
// which runs_in_this_process() has answered.
dist::ThreadsOptions rank_threads_options();

}  // namespace tessera::shardbench
