// tessera-shardbench's report on figures it is fed (issue 62 items 4 and 8, issue 61 item 4):
// the CPU time others took, the warnings that name a doubtful figure, the phases' medians over
// the same steps as the step's, and JSON that parses with null and a reason for figures that are
// not finite.

#include "tools/shardbench/report.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "tests/tools/json_check.h"
#include "tests/tools/small_model.h"
#include "tools/shardbench/simulate.h"
#include "tools/shardbench/warnings.h"

namespace tessera::shardbench {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

StrategyResult result(const std::string& name, std::vector<double> steps, double forward,
                      double backward, double optimizer) {
  StrategyResult r;
  r.strategy.name = name;
  r.measured.step_s = std::move(steps);
  r.measured.forward_s = forward;
  r.measured.backward_s = backward;
  r.measured.optimizer_s = optimizer;
  r.predicted.compute_s = forward + backward + optimizer;
  return r;
}

// A calibration whose compute line is a line (neither part clamped).
Calibration quiet_calibration() {
  Calibration cal;
  cal.batch = 8;
  cal.small_batch = 2;
  cal.compute = {1e-3, 2e-3};
  cal.gemm_flops_per_s = cal.gemm_flops_one_thread = 1e11;
  cal.model.local_bytes_per_s = 1e10;
  return cal;
}

// `"key": null,` then `"key_reason": "..."`, inline or on the next line (the top level's).
bool null_with_reason(const std::string& json, const std::string& key) {
  const std::string null = "\"" + key + "\": null,";
  for (size_t at = json.find(null); at != std::string::npos; at = json.find(null, at + 1)) {
    const size_t next = json.find_first_not_of(" \n", at + null.size());
    const std::string reason = "\"" + key + "_reason\": \"";
    if (json.compare(next, reason.size(), reason) == 0 && json[next + reason.size()] != '"') {
      return true;
    }
  }
  return false;
}

std::vector<std::string> figures(const std::vector<Warning>& warnings) {
  std::vector<std::string> out;
  for (const Warning& w : warnings) out.push_back(w.figure);
  return out;
}

TEST_CASE("cpu load: others' time is the busy time that was not this process's", "[shardbench]") {
  const CpuTimes start{100.0, 10.0, 1.0, 5.0};
  // 100 s of CPU time passed: 50 busy, 30 of them this process's; 3 stolen.
  const std::optional<CpuLoad> load = cpu_load_between(start, {200.0, 60.0, 4.0, 35.0});
  REQUIRE(load.has_value());
  CHECK(load->others == Approx(0.2));
  CHECK(load->steal == Approx(0.03));
  // getrusage counts exactly and /proc/stat in ticks: more own time than busy ticks is no one's.
  CHECK(cpu_load_between(start, {200.0, 20.0, 1.0, 25.0})->others == 0.0);
  CHECK_FALSE(cpu_load_between(start, start).has_value());
  // This machine's: busy and steal are parts of the total, and the meter reads an interval.
  const std::optional<CpuTimes> now = read_cpu_times();
  REQUIRE(now.has_value());
  CHECK(now->busy <= now->total);
  CHECK(now->self > 0.0);
  const CpuLoadMeter meter;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a few clock ticks
  const std::optional<CpuLoad> measured = meter.load();
  REQUIRE(measured.has_value());
  CHECK(measured->others >= 0.0);
  CHECK(measured->others <= 1.0);
}

// Issue 62: other processes took the machine while the run read steps of 112-337 ms, "calibrated
// compute 0.00 ms per step" and 4 of 12 pairs ordered, and the report said nothing (steal 0%);
// with --model mlp it read forward 34.2 ms in a step of 23.5.
TEST_CASE("run warnings name the figure they doubt", "[shardbench]") {
  const Calibration quiet = quiet_calibration();
  const std::vector<StrategyResult> steady{
      result("single", {0.020, 0.021, 0.022}, 0.008, 0.010, 0.002),
      result("DP", {0.030, 0.031}, 0.010, 0.015, 0.003)};
  CHECK(run_warnings(quiet, steady, CpuLoad{0.01, 0.02}).empty());
  CHECK(run_warnings(quiet, steady, std::nullopt).empty());

  const std::vector<Warning> busy = run_warnings(quiet, steady, CpuLoad{0.0, 0.32});
  REQUIRE(figures(busy) == std::vector<std::string>{"other_processes"});
  CHECK_THAT(busy[0].text, Catch::Contains("other processes took 32% of the CPU time"));
  CHECK(figures(run_warnings(quiet, steady, CpuLoad{0.05, 0.0})) ==
        std::vector<std::string>{"steal"});

  Calibration clamped = quiet;
  clamped.compute.fixed_s = 0.0;
  const std::vector<Warning> line = run_warnings(clamped, steady, std::nullopt);
  REQUIRE(figures(line) == std::vector<std::string>{"compute_fixed_s"});
  CHECK_THAT(line[0].text, Catch::Contains("0.00 ms per step") && Catch::Contains("batch 8 and 2"));
  // One batch size timed (--ranks 1 or --batch 1): no line to clamp.
  clamped.small_batch = clamped.batch;
  CHECK(run_warnings(clamped, steady, std::nullopt).empty());

  const std::vector<StrategyResult> longer{
      result("MLP", {0.0235, 0.0235, 0.0235}, 0.0342, 0.005, 0.001)};
  const std::vector<Warning> part = run_warnings(quiet, longer, std::nullopt);
  REQUIRE(figures(part) == std::vector<std::string>{"MLP.forward_s"});
  CHECK_THAT(part[0].text, Catch::Contains("forward_s 34.20 ms") && Catch::Contains("23.50 ms"));
  // Each phase within the step but their sum 20% over it.
  const std::vector<StrategyResult> sum{result("TP", {0.010}, 0.005, 0.005, 0.002)};
  const std::vector<Warning> over = run_warnings(quiet, sum, std::nullopt);
  REQUIRE(figures(over) == std::vector<std::string>{"TP.forward_s"});
  CHECK_THAT(over[0].text, Catch::Contains("exceed the step") && Catch::Contains("by 20%"));
  std::vector<StrategyResult> replayed = steady;
  replayed[1].measured.comm_alone_s = 0.040;
  CHECK(figures(run_warnings(quiet, replayed, std::nullopt)) ==
        std::vector<std::string>{"DP.comm_alone_s"});

  // The table and the JSON carry them, with the load.
  const ModelConfig c = small_model("mlp", 1);
  const std::string text = table(c, clamped, longer, CpuLoad{0.0, 0.32});
  CHECK_THAT(text, Catch::Contains("by other processes: 32%") &&
                       Catch::Contains("warning: other processes took 32%") &&
                       Catch::Contains("warning: MLP: forward_s 34.20 ms"));
  const std::string j = json(c, clamped, longer, CpuLoad{0.0, 0.32});
  REQUIRE(test::JsonCheck::error_in(j).empty());
  const nlohmann::json parsed = nlohmann::json::parse(j);
  CHECK(parsed["other_processes"].get<double>() == Approx(0.32));
  REQUIRE(parsed["warnings"].size() >= 1);
  CHECK(parsed["warnings"][0]["figure"] == "other_processes");
  CHECK_THAT(parsed["warnings"][0]["text"].get<std::string>(),
             Catch::StartsWith("other processes took 32%"));
}

// The forward 34.2 ms in a step of 23.5: the step's median was over all the rounds'
// steps and the forward's a median of the rounds' medians, which a round of slow steps moves
// apart. Rank 0's forward is part of every step, so over the same steps its median is at most
// the step's.
TEST_CASE("combine_rounds takes the phases' medians over the same steps as the step's",
          "[shardbench]") {
  const auto round = [](std::vector<double> steps, std::vector<double> forward) {
    Measurement m;
    m.step_s = steps;
    m.forward_steps_s = forward;
    m.backward_steps_s = std::vector<double>(steps.size(), 0.001);
    m.optimizer_steps_s = std::vector<double>(steps.size(), 0.001);
    m.forward_s = median(forward);  // the round's own, as measure() sets it
    return m;
  };
  // Two rounds whose upper halves met a slow spell, one quiet round.
  const std::vector<Measurement> rounds{
      round({0.010, 0.010, 0.040, 0.040}, {0.005, 0.005, 0.035, 0.035}),
      round({0.010, 0.010, 0.040, 0.040}, {0.005, 0.005, 0.035, 0.035}),
      round({0.010, 0.010, 0.010, 0.010}, {0.005, 0.005, 0.005, 0.005})};
  const Measurement m = combine_rounds(rounds);
  CHECK(median(m.step_s) == Approx(0.010));
  CHECK(m.forward_s == Approx(0.005));
  CHECK(m.forward_s <= median(m.step_s));
  CHECK(m.backward_s == Approx(0.001));
  CHECK(m.forward_steps_s.size() == 12);
}

// Issue 61: with OMP_NUM_THREADS=1 --strategies single, --json wrote a bare inf, which no JSON
// parser reads.
TEST_CASE("JSON: figures that are not finite are null with a reason and the whole parses",
          "[shardbench]") {
  const ModelConfig c = small_model("transformer", 1);
  Calibration cal = quiet_calibration();
  cal.gemm_flops_per_s = kInf;
  cal.gemm_flops_one_thread = 0.0;
  cal.model.local_bytes_per_s = kNaN;
  cal.compute.fixed_s = kInf;
  cal.replicated_compute_s = kNaN;
  cal.pointwise_speedup = kInf;
  cal.tp_share_s[{2, 4, {}}] = kNaN;
  cal.model.set_line("all_reduce", 2, {kInf, 1e-9});
  cal.notes.push_back("a note with \"quotes\" and a \\ backslash");
  StrategyResult r = result("plan \"odd\\name\".txt", {kInf}, kNaN, 0.001, -kInf);
  r.loss_error = kNaN;
  r.predicted.comm_s = kInf;
  const std::string j = json(c, cal, {r}, std::nullopt);
  INFO(j);
  CHECK(test::JsonCheck::error_in(j).empty());
  for (const char* key :
       {"gemm_flops_per_s", "gemm_flops_one_thread", "copy_bytes_per_s", "pointwise_speedup",
        "compute_fixed_s", "replicated_compute_s", "seconds", "alpha_s", "step_s_median",
        "forward_s", "optimizer_s", "predicted_step_s", "predicted_comm_s", "loss_error", "steal",
        "other_processes"}) {
    INFO(key);
    CHECK(null_with_reason(j, key));
  }
  CHECK_THAT(j, Catch::Contains("\"gemm_flops_per_s_reason\": \"not measured (a timing of 0 s)\""));
  CHECK_THAT(j, Catch::Contains("\"plan \\\"odd\\\\name\\\".txt\""));
  // The checker itself refuses what the old writer wrote.
  CHECK_FALSE(test::JsonCheck::error_in("{\"compute_fixed_s\": inf}").empty());
  CHECK_FALSE(test::JsonCheck::error_in("{\"a\": nan}").empty());
  CHECK_FALSE(test::JsonCheck::error_in("{\"name\": \"a\"b\"}").empty());
  CHECK_FALSE(test::JsonCheck::error_in("[1, 2,]").empty());

  // The simulation's JSON alike.
  SimResult s;
  s.gpus = 8;
  s.step_s = kInf;
  s.mfu = kNaN;
  s.note = "needs \"more\" memory";
  const std::string sim = simulation_json(sim_model_preset("7b"), cluster_named("8xH100"), {}, {s});
  INFO(sim);
  REQUIRE(test::JsonCheck::error_in(sim).empty());
  const nlohmann::json plan = nlohmann::json::parse(sim)["plans"][0];
  for (const char* key : {"step_s", "mfu"}) {
    INFO(key);
    CHECK(plan[key].is_null());
    CHECK_FALSE(plan[std::string(key) + "_reason"].get<std::string>().empty());
  }
}

}  // namespace
}  // namespace tessera::shardbench
