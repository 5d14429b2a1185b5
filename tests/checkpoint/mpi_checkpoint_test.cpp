// Checkpoints on the mpi backend, one process per rank. Hidden from plain runs: ctest starts them
// as `mpirun -n 4 checkpoint_tests "[mpi]"` and `mpirun -n 2 checkpoint_tests "[mpi2]"`
// (tests/CMakeLists.txt); every rank runs the same cases in the same order.

#include <catch2/catch.hpp>

#include "tessera/checkpoint/detail/rank_agreement.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/resume_training.h"

namespace tessera::checkpoint_test {
namespace {

using namespace std::chrono_literals;

dist::ProcessGroupPtr mpi_world() {
  static const dist::ProcessGroupPtr world =
      dist::init_process_group({.backend = "mpi", .timeout = 120s, .check = true});
  return world;
}

// A scratch directory every process names alike: rank 0's.
class SharedDir {
 public:
  SharedDir() {
    const std::string mine = mpi_world()->rank() == 0 ? local_.path() : std::string();
    path_ = checkpoint::detail::all_gather_strings(mpi_world().get(), mine)[0];
  }
  ~SharedDir() { mpi_world()->barrier()->wait(); }  // rank 0 removes it after everyone is done
  const std::string& path() const { return path_; }

 private:
  TempDir local_;  // rank 0's is the one used
  std::string path_;
};

TEST_CASE("mpi: resume equals no interruption under FSDP, TP and FSDP x TP", "[.mpi]") {
  REQUIRE(mpi_world()->size() == 4);
  for (const ResumeStrategy& strategy : resume_strategies()) {
    for (const bool async : {false, true}) {
      INFO(strategy.name << (async ? ", async_save" : ", save") << ", rank "
                         << mpi_world()->rank());
      SharedDir dir;
      RunResult uninterrupted, resumed;
      {
        ResumeRun run(strategy, 7);
        std::vector<double> before;
        run.train(0, 2, before);
        if (async) {
          std::future<void> saved = checkpoint::async_save(run.state_dict(), dir.path());
          run.train(2, 2, uninterrupted.losses);
          saved.get();
        } else {
          checkpoint::save(run.state_dict(), dir.path());
          run.train(2, 2, uninterrupted.losses);
        }
        uninterrupted.full_state = run.state_dict(/*full=*/true);
      }
      {
        ResumeRun run(strategy, 99);
        checkpoint::StateDict sd = run.state_dict();
        checkpoint::load(sd, dir.path());
        run.set_state(sd);
        run.train(2, 2, resumed.losses);
        resumed.full_state = run.state_dict(/*full=*/true);
      }
      CHECK(uninterrupted.losses.size() == 2);
      for (const std::string& f : compare_runs(uninterrupted, resumed)) FAIL_CHECK(f);
    }
  }
}

TEST_CASE("mpi: saved as FSDP on 4 processes, loaded as FSDP x TP on 2x2", "[.mpi]") {
  SharedDir dir;
  const Tensor w = random_bits({9, 6}, kFloat32, 1);
  {
    const DeviceMesh mesh(DeviceType::CPU, {4});
    checkpoint::StateDict sd;
    sd.tensors["w"] = distribute_tensor(w, mesh, {Shard(0)});
    checkpoint::save(sd, dir.path());
  }
  const DeviceMesh mesh(DeviceType::CPU, {2, 2}, {"dp", "tp"});
  checkpoint::StateDict sd;
  sd.tensors["w"] =
      distribute_tensor(zeros({9, 6}, kFloat32), mesh, {StridedShard(0, 2), Shard(0)});
  checkpoint::load(sd, dir.path());
  CHECK(same_bits(sd.tensors.at("w"), w));
}

TEST_CASE("mpi: saved on 4 rank threads, loaded on 2 processes", "[.mpi2]") {
  REQUIRE(mpi_world()->size() == 2);
  SharedDir dir;
  const Tensor w = random_bits({9, 6}, kBFloat16, 2);
  if (mpi_world()->rank() == 0) {
    dist::run_threads(4,
                      [&](dist::ProcessGroupPtr) {
                        const DeviceMesh mesh(DeviceType::CPU, {2, 2});
                        checkpoint::StateDict sd;
                        sd.tensors["w"] = distribute_tensor(w, mesh, {Shard(0), Shard(1)});
                        checkpoint::save(sd, dir.path());
                      },
                      {.warn_if_launched = false});
  }
  mpi_world()->barrier()->wait();
  const DeviceMesh mesh(DeviceType::CPU, {2});
  checkpoint::StateDict sd;
  sd.tensors["w"] = distribute_tensor(zeros({9, 6}, kBFloat16), mesh, {Shard(1)});
  checkpoint::load(sd, dir.path());
  CHECK(same_bits(sd.tensors.at("w"), w));
}

}  // namespace
}  // namespace tessera::checkpoint_test
