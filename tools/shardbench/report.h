#pragma once
// tessera-shardbench's output: the terminal table and JSON for scripts (the SVG chart is in
// chart.h), each with the run's warnings (warnings.h).

#include <optional>
#include <string>
#include <vector>

#include "tools/shardbench/cpu_load.h"
#include "tools/shardbench/predict.h"

namespace tessera::shardbench {

struct StrategyResult {
  Strategy strategy;
  Measurement measured;
  Prediction predicted;
  std::vector<CollectiveTotal> expected;  // closed form
  double loss_error = 0.0;                // largest |loss - one device's loss| over the steps
};

// `load`: the CPU time others took during the run (CpuLoadMeter), when known. JSON: figures that
// are not finite are null with a "<key>_reason" beside them (json_writer.h).
std::string table(const ModelConfig& c, const Calibration& cal,
                  const std::vector<StrategyResult>& results, std::optional<CpuLoad> load);
std::string json(const ModelConfig& c, const Calibration& cal,
                 const std::vector<StrategyResult>& results, std::optional<CpuLoad> load);

// "transformer: 2 layers, hidden 256, ...": the model in one line.
std::string model_text(const ModelConfig& c);

// Median over the strategies and plans of |predicted - measured| / measured; nan for none.
double median_prediction_error(const std::vector<StrategyResult>& results);

// Whether the prediction orders the strategies as the measurement does, over the pairs whose
// measured steps differ by more than `margin` of the faster one (closer pairs are within the
// machine's noise: their order is not a finding).
struct RankingAgreement {
  int pairs = 0;                        // pairs apart by more than the margin
  std::vector<std::string> discordant;  // "FSDP < TP" (measured order) predicted the other way
  // Of those, the pairs whose measured p10-p90 ranges do not overlap (told apart by every step
  // but the extremes), and how many of them are discordant.
  int separated = 0;
  int separated_discordant = 0;
};
RankingAgreement ranking_agreement(const std::vector<StrategyResult>& results, double margin);

// The largest share of a measured step spent recording its collectives (Measurement::tracing_s).
double tracing_overhead(const std::vector<StrategyResult>& results);

}  // namespace tessera::shardbench
