#pragma once
// tessera-shardbench's output: the terminal table, JSON for scripts, and an SVG chart (per
// strategy: measured step, predicted compute and communication).

#include <string>
#include <vector>

#include "tools/shardbench/predict.h"

namespace tessera::shardbench {

struct StrategyResult {
  Strategy strategy;
  Measurement measured;
  Prediction predicted;
  std::vector<CollectiveTotal> expected;  // closed form
  double loss_error = 0.0;                // largest |loss - one device's loss| over the steps
};

std::string table(const ModelConfig& c, const Calibration& cal,
                  const std::vector<StrategyResult>& results);
std::string json(const ModelConfig& c, const Calibration& cal,
                 const std::vector<StrategyResult>& results);
std::string svg(const ModelConfig& c, const std::vector<StrategyResult>& results);

// Median over the strategies of |predicted - measured| / measured.
double median_prediction_error(const std::vector<StrategyResult>& results);

}  // namespace tessera::shardbench
