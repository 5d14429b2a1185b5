#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <optional>

#include "tessera/collectives/backends.h"
#include "tessera/runtime/device.h"

namespace tessera::dist {

namespace {

std::mutex g_world_mutex;
ProcessGroupPtr g_world;
thread_local ProcessGroupPtr t_world;

ProcessGroupPtr make_world(const InitOptions& options) {
  const std::string& backend = options.backend;
  if (backend == "threads") return detail::make_threads_world(options);
  if (backend == "mpi") return detail::make_mpi_world(options);
  if (backend == "nccl") return detail::make_nccl_world(options);
  TS_CHECK(backend == "auto", "[init_process_group] unknown backend \"", backend,
           "\"; valid: \"auto\", \"mpi\", \"nccl\", \"threads\"");
  if (!started_by_launcher()) return detail::make_threads_world(options);
  if (detail::nccl_built() && cuda_is_available()) return detail::make_nccl_world(options);
  TS_CHECK(detail::mpi_built(), "[init_process_group] this process was started by an MPI ",
           "launcher, but this build of Tessera has no mpi backend (MPI was not found or ",
           "TESSERA_MPI=OFF); reconfigure with TESSERA_MPI=ON, or run without the launcher");
  return detail::make_mpi_world(options);
}

// The first of `vars` that is set, as a number.
std::optional<int> int_from_env(std::initializer_list<const char*> vars) {
  for (const char* var : vars) {
    if (const char* value = std::getenv(var)) {
      char* end = nullptr;
      const long n = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && n >= 0 && n <= INT32_MAX) return static_cast<int>(n);
    }
  }
  return std::nullopt;
}

}  // namespace

// Environment variables that MPI launchers (Open MPI, MPICH / Hydra, PMIx, Slurm's PMI) set.
bool started_by_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                          "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

std::optional<int> launcher_world_size() {
  if (!started_by_launcher()) return std::nullopt;
  return int_from_env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"});
}

std::optional<int> launcher_rank() {
  if (!started_by_launcher()) return std::nullopt;
  return int_from_env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"});
}

ProcessGroupPtr init_process_group(const InitOptions& options) {
  TS_CHECK(!t_world, "[init_process_group] this thread is a rank of dist::run_threads, whose ",
           "world is already set; use dist::world()");
  std::lock_guard lock(g_world_mutex);
  TS_CHECK(!g_world, "[init_process_group] the process group is already initialized (",
           g_world->describe(), "); call dist::destroy_process_group() first");
  g_world = make_world(options);
  return g_world;
}

bool is_initialized() {
  if (t_world) return true;
  std::lock_guard lock(g_world_mutex);
  return g_world != nullptr;
}

void destroy_process_group() {
  ProcessGroupPtr dropped;
  {
    std::lock_guard lock(g_world_mutex);
    dropped = std::move(g_world);
  }
}

ProcessGroupPtr world() {
  if (t_world) return t_world;
  std::lock_guard lock(g_world_mutex);
  TS_CHECK(g_world, "[dist::world] there is no process group: call dist::init_process_group() ",
           "or run inside dist::run_threads()");
  return g_world;
}

namespace detail {
void set_thread_world(ProcessGroupPtr world) { t_world = std::move(world); }
}  // namespace detail

}  // namespace tessera::dist
