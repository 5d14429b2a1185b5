#include "tools/launch.h"

#include <fmt/format.h>

#include <cstdio>

namespace tessera::tools {

bool runs_in_this_process(std::string_view program) {
  if (!dist::started_by_launcher()) return true;
  const int processes = dist::launcher_world_size().value_or(1);
  if (processes <= 1) return true;
  if (dist::launcher_rank().value_or(0) != 0) return false;
  const int others = processes - 1;
  fmt::print(stderr,
             "{}: started by an MPI launcher as {} processes; it runs its ranks as threads of one "
             "process, so it runs in the launcher's rank 0 alone and {} exit{}. Start it without "
             "the launcher.\n",
             program, processes,
             others == 1 ? "the other process" : fmt::format("the other {} processes", others),
             others == 1 ? "s" : "");
  return true;
}

dist::ThreadsOptions rank_threads_options() {
  dist::ThreadsOptions options;
  options.warn_if_launched = false;
  return options;
}

}  // namespace tessera::tools
