#pragma once
// When a run's figures do not mean what they say: the machine was busy with other work (other
// processes, other guests), the calibration's compute line was clamped, or a phase of a step came
// out longer than the step. The report prints each beside the figures (table and JSON), naming
// the figure it doubts.

#include <optional>
#include <string>
#include <vector>

#include "tools/shardbench/cpu_load.h"
#include "tools/shardbench/report.h"

namespace tessera::shardbench {

// Above these shares of all CPU time, runs of the same strategy differ by tens of percent: with
// other processes taking 20-40% of a 2-core machine a run read steps of 112-337 ms, a calibrated
// compute of 0.00 ms per step and 4 of 12 pairs of strategies ordered as measured (issue 62).
inline constexpr double kQuietSteal = 0.03;
inline constexpr double kQuietOthers = 0.10;
// A step's forward, backward and optimizer medians come from different steps: under noise their
// sum exceeds the median step by a few percent; by more than this share it is not noise.
inline constexpr double kPhasesOverStep = 0.10;

struct Warning {
  std::string figure;  // the JSON key it is about: "other_processes", "DP.forward_s", ...
  std::string text;    // for a reader: the figure, its value, what it disturbs
};

// `load`: the CPU time others took during the run (CpuLoadMeter), when known.
std::vector<Warning> run_warnings(const Calibration& cal,
                                  const std::vector<StrategyResult>& results,
                                  std::optional<CpuLoad> load);

}  // namespace tessera::shardbench
