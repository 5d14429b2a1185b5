#pragma once
// tessera-shardbench's SVG chart (--svg): per strategy a bar of the measured step (compute, then
// the step's collectives replayed alone) with the p10-p90 of its steps as a whisker, and a pale
// bar of the predicted step (compute, communication), on a time axis in ms, with a legend. On a
// white background (a transparent one shows black text on black in a dark viewer), and as wide
// and tall as its text needs (text_width), the run's warnings under the title.

#include <string>
#include <string_view>
#include <vector>

#include "tools/shardbench/warnings.h"

namespace tessera::shardbench {

// `warnings` (run_warnings) are printed under the title, wrapped to the chart's width.
std::string svg(const ModelConfig& c, const std::vector<StrategyResult>& results,
                const std::vector<Warning>& warnings = {});

// The estimated width of `text` in the chart's sans-serif font at `font_size` px: 0.6 em a
// character, more than the average of common sans-serif faces, so that text sized by it fits.
double text_width(std::string_view text, double font_size);

}  // namespace tessera::shardbench
