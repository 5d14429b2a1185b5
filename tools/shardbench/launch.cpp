#include "tools/shardbench/launch.h"

#include <fmt/format.h>

#include <cstdio>

namespace tessera::shardbench {

bool runs_in_this_process() {
  if (!dist::started_by_launcher()) return true;
  const int processes = dist::launcher_world_size().value_or(1);
  if (processes <= 1) return true;
  if (dist::launcher_rank().value_or(0) != 0) return false;
  fmt::print(stderr,
             "tessera-shardbench: started by an MPI launcher as {} processes; it measures its "
             "strategies on rank threads (--ranks) of one process, so it runs in the launcher's "
             "rank 0 alone and the other {} processes exit. Start it without the launcher.\n",
             processes, processes - 1);
  return true;
}

dist::ThreadsOptions rank_threads_options() {
  dist::ThreadsOptions options;
  options.warn_if_launched = false;
  return options;
}

}  // namespace tessera::shardbench
