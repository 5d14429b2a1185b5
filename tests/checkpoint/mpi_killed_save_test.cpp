// A rank killed with SIGKILL in the middle of an MPI save (issue 53): the job ends, and the next
// load finds the previous checkpoint intact, or, in a directory that had none, reports an
// incomplete checkpoint. Hidden from plain runs: ctest runs `mpirun -n 2 checkpoint_tests
// "[mpikill]"` (expected to fail: a rank dies), then `checkpoint_tests "[mpikill_load]"` in one
// process on what it left (tests/CMakeLists.txt); TESSERA_CHECKPOINT_KILL_DIR names the folder.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "tessera/checkpoint/detail/metadata.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace tessera::checkpoint_test {
namespace {

std::string kill_dir() {
  const char* dir = std::getenv("TESSERA_CHECKPOINT_KILL_DIR");
  REQUIRE(dir != nullptr);
  return dir;
}

checkpoint::StateDict committed_state(const DeviceMesh& mesh) {
  checkpoint::StateDict sd;
  sd.tensors["w"] = distribute_tensor(random_bits({8, 6}, kFloat32, 31), mesh, {Shard(0)});
  return sd;
}

// Kills this process once a chunk file of a save other than `committed_id` appears in `dir`.
std::thread kill_when_writing(const std::string& dir, const std::string& committed_id, int rank) {
  return std::thread([=] {
    const std::string mine = "-rank" + std::string(4, '0') + std::to_string(rank) + ".safetensors";
    while (true) {
      for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        const bool new_save =
            name.rfind("save-", 0) == 0 && name.ends_with(mine) &&
            (committed_id.empty() || name.find(committed_id) == std::string::npos);
        if (new_save) ::kill(::getpid(), SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
}

TEST_CASE("mpi: a rank killed during a save", "[.mpikill]") {
  using namespace std::chrono_literals;
  const dist::ProcessGroupPtr world =
      dist::init_process_group({.backend = "mpi", .timeout = 60s, .check = true});
  REQUIRE(world->size() == 2);
  const std::string dir = kill_dir();
  const DeviceMesh mesh(DeviceType::CPU, {2});
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
  checkpoint::save(committed_state(mesh), dir + "/previous");
  const std::string committed = checkpoint::detail::read_metadata(dir + "/previous").save_id;
  checkpoint::StateDict big = committed_state(mesh);
  big.tensors["big"] = distribute_tensor(zeros({1 << 24}, kFloat32), mesh, {Shard(0)});  // 64 MiB
  std::thread killer;
  if (world->rank() == 1) killer = kill_when_writing(dir + "/previous", committed, 1);
  checkpoint::save(big, dir + "/previous");  // rank 1 dies in it; mpirun ends the job
  FAIL("the save finished before rank 1 was killed");
}

TEST_CASE("after a rank was killed during a save", "[.mpikill_load]") {
  const std::string dir = kill_dir();
  // The previous checkpoint in the same directory loads as it was committed.
  dist::run_threads(2, [&](dist::ProcessGroupPtr) {
    const DeviceMesh mesh(DeviceType::CPU, {2});
    checkpoint::StateDict sd;
    sd.tensors["w"] = distribute_tensor(zeros({8, 6}, kFloat32), mesh, {Shard(1)});
    checkpoint::load(sd, dir + "/previous");
    if (!same_bits(sd.tensors.at("w"), random_bits({8, 6}, kFloat32, 31))) {
      throw std::logic_error("the previous checkpoint changed");
    }
  });
  // The killed save left chunk files but no metadata naming them.
  bool left_chunks = false;
  const std::string committed = checkpoint::detail::read_metadata(dir + "/previous").save_id;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/previous")) {
    const std::string name = entry.path().filename().string();
    left_chunks =
        left_chunks || (name.rfind("save-", 0) == 0 && name.find(committed) == std::string::npos);
  }
  CHECK(left_chunks);  // the kill came mid-save, not after it
}

}  // namespace
}  // namespace tessera::checkpoint_test
