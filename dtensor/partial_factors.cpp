#include "tessera/dtensor/partial_factors.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::dtensor {

namespace {

// A contiguous CPU float32 / float64 tensor is read once in place, on its bits: the exponent all
// ones is inf or NaN, and (for a divisor) all bits but the sign zero is 0. Counting matches in
// blocks vectorizes (a bool or-ed per element kept the loop scalar, 90x the read's time) and
// stops at the first block that holds one.
template <typename T, typename Bits>
bool scan_bad(const T* p, int64_t n, bool zero_is_bad) {
  constexpr Bits kExponent = sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  constexpr Bits kMagnitude = static_cast<Bits>(~Bits(0) >> 1);
  const Bits zero_mask = zero_is_bad ? kMagnitude : Bits(0);  // no match when zeros are fine
  constexpr int64_t kBlock = 4096;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    Bits found = 0;
    for (int64_t i = begin; i < end; ++i) {
      Bits bits;
      std::memcpy(&bits, p + i, sizeof bits);
      found += ((bits & kExponent) == kExponent) | (zero_is_bad & ((bits & zero_mask) == 0));
    }
    if (found != 0) return true;
  }
  return false;
}

bool holds_bad_factor(const Tensor& t, bool zero_is_bad) {
  if (t.numel() == 0) return false;
  if (t.device().is_cpu() && t.is_contiguous()) {
    if (t.dtype() == kFloat32)
      return scan_bad<float, uint32_t>(t.data_ptr<float>(), t.numel(), zero_is_bad);
    if (t.dtype() == kFloat64)
      return scan_bad<double, uint64_t>(t.data_ptr<double>(), t.numel(), zero_is_bad);
  }
  const NoGradGuard no_grad;
  // x * 0 is 0 for finite x and NaN for inf and NaN: the sum is NaN exactly when one is not.
  if (is_floating_point(t.dtype()) &&
      std::isnan(sum(t * 0.0, {}, false, kFloat64).item<double>())) {
    return true;
  }
  return zero_is_bad && sum(t == 0.0).item<int64_t>() > 0;
}

}  // namespace

bool partials_meet_bad_factor(PartialFactors kind, const std::vector<Placements>& run_placements,
                              const std::vector<Tensor>& run_locals, const DeviceMesh& mesh) {
  if (kind == PartialFactors::kNone) return false;
  bool bad = false;
  std::vector<bool> agree_over(static_cast<size_t>(mesh.ndim()), false);
  for (size_t j = 0; j < run_placements.size(); ++j) {
    if (run_placements[j].empty() || (kind == PartialFactors::kDivisor && j != 1)) continue;
    // Operand j matters where it is Replicate beside another input's Partial.
    bool beside_partial = false;
    for (size_t m = 0; m < run_placements[j].size(); ++m) {
      if (!run_placements[j][m].is_replicate()) continue;
      for (size_t i = 0; i < run_placements.size(); ++i) {
        if (i != j && !run_placements[i].empty() && run_placements[i][m].is_partial()) {
          beside_partial = true;
        }
      }
    }
    if (!beside_partial) continue;
    bad = bad || holds_bad_factor(run_locals[j], kind == PartialFactors::kDivisor);
    for (size_t m = 0; m < run_placements[j].size(); ++m) {
      if (!run_placements[j][m].is_replicate()) agree_over[m] = true;
    }
  }
  // Ranks holding different parts of an operand may see different verdicts: agree on the worst.
  for (size_t m = 0; m < agree_over.size(); ++m) {
    if (!agree_over[m]) continue;
    const Tensor flag = full({1}, bad ? 1.0 : 0.0, TensorOptions().dtype(kFloat32));
    mesh.get_group(static_cast<int64_t>(m))->all_reduce(flag, dist::ReduceOp::Max)->wait();
    bad = flag.item<float>() > 0.0f;
  }
  return bad;
}

}  // namespace tessera::dtensor
