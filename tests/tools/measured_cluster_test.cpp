// --simulate --cluster RUN.json (issue 56): a measured run's calibration as this machine's cluster,
// each figure against the arithmetic done here by hand; the errors; and the tool end to end.

#include "tools/shardbench/measured_cluster.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/tools/run_command.h"
#include "tools/shardbench/cluster.h"
#include "tools/shardbench/model.h"

namespace tessera::shardbench {
namespace {

using Json = nlohmann::json;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("measured_cluster_test_" + name)).string();
}

// The fields of a measured run's JSON that the cluster reads, with round numbers.
Json measured_run() {
  return Json{{"model",
               {{"preset", "transformer"},
                {"layers", 2},
                {"hidden", 64},
                {"heads", 4},
                {"seq", 16},
                {"batch", 4},
                {"vocab", 128}}},
              {"ranks",
               {{"backend", "mpi"},
                {"ranks", 4},
                {"processes", 4},
                {"processes_on_this_host", 4},
                {"intra_op_threads_per_rank", 2}}},
              {"calibration",
               {{"gemm_flops_one_thread", 1e11},
                {"copy_bytes_per_s", 2e10},
                {"host_memory_bytes", 32e9},
                {"compute_fixed_s", 0.001},
                {"compute_per_sequence_s", 0.002},
                {"collectives",
                 {{"all_reduce/2", {{"alpha_s", 1e-6}, {"beta_s_per_byte", 1e-9}}},
                  {"all_reduce/4", {{"alpha_s", 12e-6}, {"beta_s_per_byte", 5e-10}}}}}}}};
}

std::string written(const Json& j, const std::string& name) {
  const std::string path = temp_path(name);
  std::ofstream(path) << j.dump(2);
  return path;
}

TEST_CASE("a measured run's JSON as a cluster: each figure from its calibration",
          "[shardbench][simulate]") {
  const std::string path = written(measured_run(), "run.json");
  REQUIRE(looks_like_json(path));
  const Cluster c = cluster_named(path);  // the way --cluster reads it
  CHECK_THAT(c.name, Catch::Contains("this machine") && Catch::Contains("4 ranks per host"));
  CHECK(c.gpus_per_node == 4);
  // The 4-rank all_reduce as a ring: 2 (4-1)/4 bytes per byte at the link's rate, 6 steps.
  CHECK(c.intra_bytes_per_s == Approx(1.5 / 5e-10));
  CHECK(c.intra_latency_s == Approx(12e-6 / 6));
  CHECK(c.inter_bytes_per_s == c.intra_bytes_per_s);
  CHECK(c.peak_flops == Approx(2e11));  // one thread's rate x 2 threads
  ModelConfig m;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.seq = 16;
  m.batch = 4;
  m.vocab = 128;
  const double step_s = 0.001 + 0.002 * 4;
  CHECK(c.compute_efficiency == Approx(step_gemm_flops(m) / step_s / 1e11));
  CHECK(c.memory_bytes_per_s == Approx(2e10 / 4));
  CHECK(c.memory_bytes == Approx(8e9));
  std::remove(path.c_str());
}

TEST_CASE("a measured run's JSON as a cluster: errors name the file and what is missing",
          "[shardbench][simulate]") {
  const auto refused = [](const Json& j, const std::string& fragment) {
    const std::string path = written(j, "bad.json");
    INFO(j.dump());
    CHECK_THROWS_WITH(cluster_named(path), Catch::Contains(path) && Catch::Contains(fragment));
    std::remove(path.c_str());
  };
  Json no_ranks = measured_run();
  no_ranks.erase("ranks");
  refused(no_ranks, "'ranks.ranks'");
  Json one_device = measured_run();
  one_device["calibration"]["collectives"] = Json::object();
  refused(one_device, "no all_reduce on 2 or more ranks");
  Json latency_only = measured_run();
  latency_only["calibration"]["collectives"]["all_reduce/4"]["beta_s_per_byte"] = 0.0;
  refused(latency_only, "all_reduce/4 has no bandwidth term");
  Json mlp = measured_run();
  mlp["model"]["preset"] = "mlp";
  refused(mlp, "the 'mlp' model");
  const std::string broken = temp_path("broken.json");
  std::ofstream(broken) << "{ \"ranks\": ";
  CHECK_THROWS_WITH(cluster_named(broken), Catch::Contains("not JSON"));
  std::remove(broken.c_str());
}

TEST_CASE("tessera-shardbench --simulate on the cluster of its own measured run",
          "[shardbench][simulate][cli]") {
  const std::string json = temp_path("measured.json");
  const test::CommandResult measured = test::run_command(
      std::string("OMP_NUM_THREADS=1 ") + TESSERA_SHARDBENCH +
      " --layers 1 --hidden 64 --heads 4 --seq 16 --batch 4 --vocab 128 --steps 1 --warmup 0 "
      "--rounds 1 --strategies single,fsdp --json " +
      json + " 2>&1");
  INFO(measured.output);
  REQUIRE(measured.status == 0);
  const test::CommandResult simulated =
      test::run_command(std::string(TESSERA_SHARDBENCH) + " --simulate --cluster " + json +
                        " --gpus 4,16 --sim-model gpt-1.7b 2>&1");
  INFO(simulated.output);
  CHECK(simulated.status == 0);
  CHECK_THAT(simulated.output,
             Catch::Contains("on this machine (" + json) && Catch::Contains("4 ranks per host"));
  std::remove(json.c_str());
}

}  // namespace
}  // namespace tessera::shardbench
