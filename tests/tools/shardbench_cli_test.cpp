// tessera-shardbench as a user runs it (issue 62 items 5 and 6, issue 61 item 4), on a model
// small enough for a test: output redirected to a pipe carries no progress-bar frames, errors
// come before the run and exit 2 naming the flag, --list-modules, --ranks 3 DP, and the JSON of
// a one-thread single-device run parses.

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/tools/json_check.h"
#include "tests/tools/run_command.h"
#include "tools/shardbench/progress.h"

namespace tessera::shardbench {
namespace {

using Run = test::CommandResult;

Run run_tool(const std::string& args, const std::string& env = "") {
  return test::run_command(env + " " + TESSERA_SHARDBENCH + " " + args + " 2>&1");
}

// A run of seconds: a 2-rank MLP of 16 features, one step a round.
const std::string kTiny =
    "--model mlp --hidden 16 --heads 1 --seq 4 --batch 4 --ranks 2 --steps 1 --warmup 0 "
    "--rounds 1";

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("shardbench_cli_test_" + name)).string();
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("tessera-shardbench into a pipe: no progress frames and JSON that parses",
          "[shardbench][cli]") {
  const std::string json = temp_path("run.json");
  const Run r = run_tool(kTiny + " --strategies single,dp --json " + json);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find('\r') == std::string::npos);
  CHECK_THAT(r.output, Catch::Contains("DP ") && Catch::Contains("by other processes:"));
  CHECK(test::JsonCheck::error_in(read(json)).empty());
  std::remove(json.c_str());
}

// Issue 61: OMP_NUM_THREADS=1 --strategies single wrote a bare inf.
TEST_CASE("one intra-op thread and one device: the JSON parses", "[shardbench][cli]") {
  const std::string json = temp_path("single.json");
  const Run r = run_tool(kTiny + " --strategies single --json " + json, "OMP_NUM_THREADS=1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string text = read(json);
  INFO(text);
  CHECK(test::JsonCheck::error_in(text).empty());
  std::remove(json.c_str());
}

TEST_CASE("tessera-shardbench refuses before the run and names the flag", "[shardbench][cli]") {
  const auto refused = [](const std::string& args, const std::string& fragment) {
    const Run r = run_tool(args);
    INFO(args << "\n" << r.output);
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Catch::Contains(fragment));
    CHECK_THAT(r.output, !Catch::Contains("step ms"));  // no table: the run did not start
  };
  refused("--simualte", "unknown flag --simualte");
  refused(kTiny + " --simualte --steps 1", "unknown flag --simualte");
  refused(kTiny + " --json /no/such/folder/out.json", "--json '/no/such/folder/out.json'");
  refused(kTiny + " --svg " + std::filesystem::temp_directory_path().string(), "--svg '");
  refused(kTiny + " --ranks 3 --strategies fsdp", "3 does not divide 16");
  const std::string plan = temp_path("plan.txt");
  { std::ofstream(plan) << "0 colwise\nblocks.*.up rowwise\n"; }
  refused(kTiny + " --plan " + plan, plan + ":2 ('blocks.*.up rowwise'): 'blocks.*.up' matches no");
  std::remove(plan.c_str());
}

TEST_CASE("tessera-shardbench --list-modules and --ranks 3 DP", "[shardbench][cli]") {
  const Run list = run_tool("--list-modules --layers 3");
  INFO(list.output);
  CHECK(list.status == 0);
  CHECK_THAT(list.output, Catch::Contains("blocks.*.wq") && Catch::Contains("Linear"));
  // Issue 62: "no timing for collective all_gather".
  // The transformer: DTensor gathers its uneven batch shards with all_gather.
  const Run dp = run_tool(
      "--model transformer --layers 1 --hidden 16 --heads 2 --seq 4 --batch 4 --vocab 32 "
      "--steps 1 --warmup 0 --rounds 1 --ranks 3 --strategies dp");
  INFO(dp.output);
  CHECK(dp.status == 0);
  CHECK_THAT(dp.output, Catch::Contains("DP "));
}

TEST_CASE("the progress bar draws only where told and clears its line before an error",
          "[shardbench][cli]") {
  const auto written = [](bool draw, int steps) {
    std::FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    {
      ProgressBar bar(4, f, draw);
      for (int i = 0; i < steps; ++i) bar.step("DP");
    }
    std::fputs("error\n", f);  // what main prints after the bar's destructor ran
    std::rewind(f);
    std::string out;
    for (int ch; (ch = std::fgetc(f)) != EOF;) out += static_cast<char>(ch);
    std::fclose(f);
    return out;
  };
  CHECK(written(false, 2) == "error\n");
  const std::string cut = written(true, 2);  // an error after 2 of 4 steps
  CHECK_THAT(cut, Catch::Contains("[===============               ]  50% DP"));
  // The last frame blanked and the cursor back at the line's start: the error has the line.
  const size_t last_frame = cut.rfind("50% DP");
  const std::string after = cut.substr(cut.find('\r', last_frame));
  REQUIRE(after.size() > 8);
  CHECK(after.front() == '\r');
  CHECK(after.find_first_not_of(' ', 1) == after.size() - 7);  // spaces up to "\rerror\n"
  CHECK_THAT(after, Catch::EndsWith("\rerror\n"));
  CHECK_THAT(written(true, 4), Catch::EndsWith(" \rerror\n"));
  // A file is not a terminal: the two-argument bar draws nothing into it.
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    ProgressBar bar(2, f);
    bar.step("one device");
  }
  CHECK(std::ftell(f) == 0);
  std::fclose(f);
}

}  // namespace
}  // namespace tessera::shardbench
