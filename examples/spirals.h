#pragma once
// The examples' synthetic 2-D classification task: three interleaved spiral arms (cs231n's
// spirals), 100 points each, drawn from a given generator.

#include <tessera/tessera.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace examples {

namespace ts = tessera;

constexpr int64_t kClasses = 3;
constexpr int64_t kPointsPerClass = 100;

struct Dataset {
  ts::Tensor x;  // [N, 2] float32
  ts::Tensor y;  // [N] int64
};

// Arm k: radius r from 0 to 1, angle 4 (k + r) plus Gaussian noise of std 0.2 (cs231n's spirals).
inline Dataset spirals(ts::Generator& gen) {
  const int64_t n = kClasses * kPointsPerClass;
  const std::vector<float> noise = ts::randn({n}, ts::kFloat32, &gen).to_vector<float>();
  std::vector<float> points;
  std::vector<int64_t> labels;
  for (int64_t k = 0; k < kClasses; ++k) {
    for (int64_t i = 0; i < kPointsPerClass; ++i) {
      const double r = static_cast<double>(i) / (kPointsPerClass - 1);
      const double angle =
          4.0 * (static_cast<double>(k) + r) + 0.2 * noise[k * kPointsPerClass + i];
      points.push_back(static_cast<float>(r * std::sin(angle)));
      points.push_back(static_cast<float>(r * std::cos(angle)));
      labels.push_back(k);
    }
  }
  return {ts::from_vector(points, {n, 2}), ts::from_vector(labels, {n})};
}

}  // namespace examples
