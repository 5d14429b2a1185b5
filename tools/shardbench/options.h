#pragma once
// tessera-shardbench's command line.

#include <string>
#include <vector>

#include "tools/shardbench/measure.h"
#include "tools/shardbench/simulate.h"

namespace tessera::shardbench {

struct Options {
  ModelConfig model;
  int64_t ranks = 4;
  bool ranks_given = false;  // --ranks on the command line (a launched run takes the world's)
  std::vector<std::string> strategies{"single", "dp", "tp", "sp", "fsdp", "fsdp_tp"};
  std::string plan_file;  // adds a strategy from a plan file
  RunOptions run;
  std::string json_file, svg_file;
  bool help = false;
  bool list_modules = false;  // print the paths --plan can name, run nothing
  // --simulate: a cluster that is not here, instead of the measured run.
  bool simulate = false;
  std::string cluster = "8xH100";  // a preset or a cluster file
  std::vector<int64_t> gpus{8, 64, 512, 4096};
  std::string sim_model = "7b";
  SimOptions sim;
};

// Errors (tessera::Error): an unknown flag (checked before its value: "unknown flag --simualte;
// did you mean --simulate?"), a missing or malformed value, a value out of range
// (sizes >= 1, heads dividing hidden, steps >= 1, efficiency in (0, 1]), an unknown dtype, preset
// or --sim-model. A --cluster value is checked when the simulation reads it.
Options parse_options(const std::vector<std::string>& args);
std::string usage();

// Errors naming the flag and path when --json or --svg (not written by --simulate) cannot be
// written: a folder, a missing folder, no write permission. Called before the run.
void check_output_paths(const Options& o);

// The least tensor memory a measured run holds at once: the larger of one device's step and the
// calibration's replicas of the model trained on every rank thread at once, each on batch / ranks
// sequences (every run trains both; the strategies hold no more than the replicas, or shard).
struct RunMemory {
  std::string phase;  // "one device's step", "the calibration's 4 replicas trained at once ..."
  int64_t copies = 1;
  StepMemory step;  // of one copy
  double bytes() const { return static_cast<double>(copies) * step.peak_bytes(); }
};
RunMemory run_memory(const Options& o);

// This machine's memory: physical, or the cgroup's limit where lower.
double machine_memory_bytes();

// Errors when run_memory(o) exceeds `available` bytes, before the run allocates anything: the
// message gives the estimate and the largest terms with the flags that size them.
void check_memory(const Options& o, double available);

}  // namespace tessera::shardbench
