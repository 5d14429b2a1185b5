#pragma once
// tessera-redistribute runs its ranks as threads of one process. Started by an MPI launcher it
// would otherwise run as many independent copies as processes, each printing its own results:
// the launcher's rank 0 runs the tool alone and says so, the other processes exit at once (before
// parsing flags, so that a flag error is said once). (tessera-shardbench runs on the launched
// processes instead: tools/shardbench/ranks.h.)

#include <string_view>

#include "tessera/collectives/dist.h"

namespace tessera::tools {

// Whether this process runs the tool: false in a launched process other than rank 0. Rank 0 of
// a launched job of several processes prints, once, that `program` runs alone.
bool runs_in_this_process(std::string_view program);

// The options of every run_threads of a tool: no run_threads warning under a launcher, which
// runs_in_this_process() has answered.
dist::ThreadsOptions rank_threads_options();

}  // namespace tessera::tools
