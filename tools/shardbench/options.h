#pragma once
// tessera-shardbench's command line.

#include <string>
#include <vector>

#include "tools/shardbench/measure.h"

namespace tessera::shardbench {

struct Options {
  ModelConfig model;
  int64_t ranks = 4;
  std::vector<std::string> strategies{"single", "dp", "tp", "sp", "fsdp", "fsdp_tp"};
  std::string plan_file;  // adds a strategy from a plan file
  RunOptions run;
  std::string json_file, svg_file;
  bool help = false;
};

// Errors (tessera::Error): an unknown flag, a missing or malformed value, a value out of range
// (sizes >= 1, heads dividing hidden, steps >= 1), an unknown dtype or preset.
Options parse_options(const std::vector<std::string>& args);
std::string usage();

}  // namespace tessera::shardbench
