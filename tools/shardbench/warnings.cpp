#include "tools/shardbench/warnings.h"

#include <fmt/format.h>

#include <cmath>

namespace tessera::shardbench {

namespace {

// A phase of a step, or the step's collectives replayed alone, longer than the whole step.
void check_parts(const StrategyResult& r, std::vector<Warning>& out) {
  const Measurement& m = r.measured;
  const double step = median(m.step_s);
  if (!(step > 0.0) || !std::isfinite(step)) return;
  const std::pair<const char*, double> parts[] = {{"forward_s", m.forward_s},
                                                  {"backward_s", m.backward_s},
                                                  {"optimizer_s", m.optimizer_s},
                                                  {"comm_alone_s", m.comm_alone_s}};
  bool longer = false;
  for (const auto& [key, seconds] : parts) {
    if (!(seconds > step)) continue;  // nan is not longer
    longer = true;
    out.push_back(
        {r.strategy.name + "." + key,
         fmt::format("{}: {} {:.2f} ms is longer than the whole step, {:.2f} ms (median): "
                     "the machine's load moved between the steps; its phases are noise",
                     r.strategy.name, key, seconds * 1e3, step * 1e3)});
  }
  const double phases = m.forward_s + m.backward_s + m.optimizer_s;
  if (!longer && phases > (1.0 + kPhasesOverStep) * step) {
    out.push_back(
        {r.strategy.name + ".forward_s",
         fmt::format("{}: forward + backward + optimizer {:.2f} ms exceed the step, {:.2f} ms "
                     "(median), by {:.0f}%: the machine's load moved between the steps",
                     r.strategy.name, phases * 1e3, step * 1e3, 100 * (phases / step - 1.0))});
  }
}

}  // namespace

std::vector<Warning> run_warnings(const Calibration& cal,
                                  const std::vector<StrategyResult>& results,
                                  std::optional<CpuLoad> load) {
  std::vector<Warning> out;
  if (load && load->others > kQuietOthers) {
    out.push_back({"other_processes",
                   fmt::format("other processes took {:.0f}% of the CPU time during the run: the "
                               "step times and their p10-p90, the calibration and the predictions "
                               "and ranking made from it are not this machine's; rerun it idle",
                               100 * load->others)});
  }
  if (load && load->steal > kQuietSteal) {
    out.push_back({"steal", fmt::format("the hypervisor took {:.0f}% of the CPU time for other "
                                        "guests (steal): a shared machine, runs differ; compare "
                                        "strategies within one run only",
                                        100 * load->steal)});
  }
  // set_compute clamps a line through two disturbed timings at zero.
  if (cal.small_batch < cal.batch &&
      (cal.compute.fixed_s <= 0.0 || cal.compute.per_sequence_s <= 0.0)) {
    out.push_back(
        {cal.compute.fixed_s <= 0.0 ? "compute_fixed_s" : "compute_per_sequence_s",
         fmt::format(
             "calibrated compute {:.2f} ms per step + {:.2f} ms per sequence: the line "
             "through the one-thread steps at batch {} and {} came out negative and was "
             "clamped at 0, so those timings were disturbed; predictions built on it are off",
             cal.compute.fixed_s * 1e3, cal.compute.per_sequence_s * 1e3, cal.batch,
             cal.small_batch)});
  }
  for (const StrategyResult& r : results) check_parts(r, out);
  return out;
}

}  // namespace tessera::shardbench
