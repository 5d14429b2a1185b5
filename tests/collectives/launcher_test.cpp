// A program started by an MPI launcher that makes rank threads says, once, that each launched
// process runs a copy of its own (issue 62: tp_train and tessera-shardbench under mpirun -n 4
// silently printed four results). The launcher is simulated by the variables Open MPI sets.

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tessera/collectives/dist.h"

namespace dist = tessera::dist;

namespace {

// Sets the variables for the scope, restoring their absence after.
class LaunchedAs {
 public:
  LaunchedAs(const char* size, const char* rank) {
    setenv("OMPI_COMM_WORLD_SIZE", size, 1);
    setenv("OMPI_COMM_WORLD_RANK", rank, 1);
  }
  ~LaunchedAs() {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
  }
};

// What fn writes to stderr.
std::string stderr_of(const std::function<void()>& fn) {
  char path[] = "/tmp/tessera-launcher-test-XXXXXX";
  const int file = mkstemp(path);
  REQUIRE(file >= 0);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(file, 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path);
  return text.str();
}

}  // namespace

TEST_CASE("launcher: detected from the launcher's variables", "[collectives][threads]") {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr) {
    WARN("skipped: this test binary itself runs under a launcher");
    return;
  }
  CHECK_FALSE(dist::started_by_launcher());
  CHECK_FALSE(dist::launcher_world_size().has_value());
  const LaunchedAs launched("4", "2");
  CHECK(dist::started_by_launcher());
  CHECK(dist::launcher_world_size() == 4);
  CHECK(dist::launcher_rank() == 2);
}

TEST_CASE("launcher: run_threads under a launcher says each process runs its own copy",
          "[collectives][threads]") {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr) {
    WARN("skipped: this test binary itself runs under a launcher");
    return;
  }
  const auto run = [] {
    dist::run_threads(2, [](dist::ProcessGroupPtr world) { world->barrier(); });
  };
  // Launcher rank 1 stays quiet (rank 0 says it for the job); without a launcher, nothing.
  {
    const LaunchedAs launched("4", "1");
    CHECK(stderr_of(run).empty());
  }
  CHECK(stderr_of(run).empty());
  const LaunchedAs launched("4", "0");
  const std::string said = stderr_of(run);
  CHECK_THAT(said, Catch::Contains("started by an MPI launcher as one of 4 processes") &&
                       Catch::Contains("runs its 2 ranks as threads of this process alone") &&
                       Catch::Contains("dist::init_process_group()"));
  // Once per process.
  CHECK(stderr_of(run).empty());
}
