// tessera-shardbench on processes (issue 56): `mpirun -n 4 tessera-shardbench` runs every
// strategy on the job's 4 processes, its losses those of one device and its collectives the
// closed-form ones, its JSON with the keys of a run on 4 rank threads; flag errors said once.
// Hidden ([.mpirun]): ctest runs them where MPI is (tools/shardbench_mpirun), not under the
// sanitizers.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "tests/tools/run_command.h"

namespace tessera::shardbench {
namespace {

using Json = nlohmann::json;
using Run = test::CommandResult;

// A run of seconds: a 1-block transformer on 4 ranks, 2 steps (the losses of one device compared
// over both), every built-in strategy.
const std::string kTiny =
    "--layers 1 --hidden 32 --heads 4 --seq 8 --batch 4 --vocab 64 --steps 2 --warmup 0 "
    "--rounds 1";

Run on_processes(const std::string& args, int processes = 4) {
  return test::run_command(
      std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") +
      "OMP_NUM_THREADS=1 " + TESSERA_MPIEXEC + " -n " + std::to_string(processes) +
      " --oversubscribe " + TESSERA_SHARDBENCH + " " + args + " 2>&1");
}

Run on_threads(const std::string& args) {
  return test::run_command(std::string("OMP_NUM_THREADS=1 ") + TESSERA_SHARDBENCH + " " + args +
                           " 2>&1");
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("shardbench_mpirun_test_" + name)).string();
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());  // throws, failing the test, on what a script could not read
}

// Every key path of `j` ("strategies[].collectives[].kind"): arrays by their elements' keys.
void key_paths(const Json& j, const std::string& prefix, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      out.insert(prefix + key);
      key_paths(value, prefix + key + ".", out);
    }
  } else if (j.is_array()) {
    for (const Json& element : j) key_paths(element, prefix + "[].", out);
  }
}
std::set<std::string> key_paths(const Json& j) {
  std::set<std::string> out;
  key_paths(j, "", out);
  return out;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("mpirun -n 4: every strategy on 4 processes, exact and with the threads run's JSON keys",
          "[.mpirun]") {
  const std::string processes_json = temp_path("processes.json");
  const std::string threads_json = temp_path("threads.json");
  const Run processes = on_processes(kTiny + " --json " + processes_json);
  INFO(processes.output);
  REQUIRE(processes.status == 0);
  // One table, from rank 0, saying where its ranks ran.
  CHECK(occurrences(processes.output, "step ms") == 1);
  CHECK_THAT(processes.output,
             Catch::Contains("ranks: 4 processes (mpi backend, 4 on this host), 1 intra-op thread "
                             "each"));
  const Json p = read_json(processes_json);
  CHECK(p["ranks"]["backend"] == "mpi");
  CHECK(p["ranks"]["processes"] == 4);
  CHECK(p["ranks"]["ranks"] == 4);
  std::set<std::string> names;
  for (const Json& s : p["strategies"]) {
    INFO(s["name"]);
    names.insert(s["name"].get<std::string>());
    // Losses of one device (float32 sums in another order), collectives of the closed form.
    CHECK(s["loss_error"].get<double>() < 1e-4);
    CHECK(s["collectives_match_formula"] == true);
    CHECK(s["step_s_median"].get<double>() > 0.0);
    CHECK(s["peak_bytes"].get<int64_t>() > 0);
  }
  CHECK(names == std::set<std::string>{"single", "DP", "TP", "SP", "FSDP", "FSDP x TP"});

  const Run threads = on_threads(kTiny + " --ranks 4 --json " + threads_json);
  INFO(threads.output);
  REQUIRE(threads.status == 0);
  const Json t = read_json(threads_json);
  CHECK(t["ranks"]["backend"] == "threads");
  CHECK(t["ranks"]["processes"] == 1);
  CHECK(key_paths(p) == key_paths(t));
  // The same strategies issue the same collectives on either world.
  for (size_t i = 0; i < p["strategies"].size() && i < t["strategies"].size(); ++i) {
    CHECK(p["strategies"][i]["collectives"] == t["strategies"][i]["collectives"]);
  }
  std::filesystem::remove(processes_json);
  std::filesystem::remove(threads_json);
}

TEST_CASE("mpirun -n 4: a flag error is said once and every process exits 2", "[.mpirun]") {
  const auto refused = [](const std::string& args, const std::string& fragment) {
    const Run r = on_processes(args);
    INFO(args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK(occurrences(r.output, fragment) == 1);
    CHECK_THAT(r.output, !Catch::Contains("step ms") && !Catch::Contains("MPI_ABORT"));
  };
  refused("--simualte", "unknown flag --simualte");
  refused(kTiny + " --steps", "--steps expects a value");
  refused(kTiny + " --ranks 3", "--ranks 3 in a launched job of 4 processes");
  refused(kTiny + " --json /no/such/folder/out.json", "--json '/no/such/folder/out.json'");
}

TEST_CASE("mpirun -n 2: --help and --list-modules print once", "[.mpirun]") {
  const Run help = on_processes("--help", 2);
  INFO(help.output);
  CHECK(help.status == 0);
  CHECK(occurrences(help.output, "--strategies LIST") == 1);
  const Run list = on_processes("--list-modules --layers 2", 2);
  INFO(list.output);
  CHECK(list.status == 0);
  CHECK(occurrences(list.output, "blocks.*.wq") == 1);
}

}  // namespace
}  // namespace tessera::shardbench
