// Bulk float16 / bfloat16 conversions (runtime/half_convert.h) against Half's and BFloat16's own
// conversions (tested against an independent double reference in dtype_test.cpp): every 16-bit
// pattern one way; the other way every representable value, the midpoints between neighbours
// (ties) and the floats just beside them, specials and overflow, in lengths that leave tails.

#include "tessera/runtime/half_convert.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using tessera::BFloat16;
using tessera::Half;

namespace {

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// Floats that exercise rounding into a 16-bit format whose value of bits b is to_float(b): each
// finite value, the midpoint to the next one up and the floats just below and above it.
template <typename ToFloat>
std::vector<float> rounding_cases(ToFloat to_float) {
  std::vector<float> v;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float x = to_float(static_cast<uint16_t>(b));
    const float next = to_float(static_cast<uint16_t>(b + 1));
    if (!std::isfinite(x)) continue;
    v.push_back(x);
    if (std::isfinite(next) && std::signbit(x) == std::signbit(next) && x != next) {
      const float mid = x + (next - x) / 2;  // exact: one more mantissa bit than the format
      v.push_back(mid);
      v.push_back(std::nextafter(mid, -INFINITY));
      v.push_back(std::nextafter(mid, INFINITY));
    }
  }
  for (float s : {1.0f, -1.0f}) {
    for (float x : {0.0f, INFINITY, 65504.0f, 65519.99f, 65520.0f, 1e30f, 1e-30f, 5.9e-8f, 2.9e-8f,
                    3.0e-8f, std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
      v.push_back(s * x);
    }
  }
  v.push_back(std::bit_cast<float>(0x7fc00000u));  // quiet NaN
  v.push_back(std::bit_cast<float>(0xff812345u));  // negative signalling NaN with a payload
  v.push_back(1.5f);                               // odd length: the tail path
  return v;
}

}  // namespace

TEST_CASE("bulk float16 conversion matches Half's, every value", "[runtime][dtype]") {
  std::vector<Half> all(0x10000 + 5);  // + 5: a tail after the groups of 8
  for (size_t i = 0; i < all.size(); ++i) all[i] = Half::from_bits(static_cast<uint16_t>(i));
  std::vector<float> floats(all.size());
  tessera::detail::halves_to_floats(all.data(), floats.data(), static_cast<int64_t>(all.size()));
  int wrong = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = static_cast<float>(all[i]);
    const bool ok = std::isnan(want)
                        ? std::isnan(floats[i])
                        : std::bit_cast<uint32_t>(floats[i]) == std::bit_cast<uint32_t>(want);
    if (!ok && ++wrong <= 5) FAIL_CHECK("half 0x" << std::hex << all[i].bits);
  }
  CHECK(wrong == 0);

  const std::vector<float> cases =
      rounding_cases([](uint16_t b) { return static_cast<float>(Half::from_bits(b)); });
  std::vector<Half> halves(cases.size());
  tessera::detail::floats_to_halves(cases.data(), halves.data(),
                                    static_cast<int64_t>(cases.size()));
  wrong = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const uint16_t want = Half(cases[i]).bits;
    const bool ok = half_is_nan(want) ? half_is_nan(halves[i].bits) : halves[i].bits == want;
    if (!ok && ++wrong <= 5) {
      FAIL_CHECK("float " << cases[i] << ": got 0x" << std::hex << halves[i].bits << ", want 0x"
                          << want);
    }
  }
  CHECK(wrong == 0);

  // In place: the halves written over the floats they come from.
  std::vector<float> same = cases;
  tessera::detail::floats_to_halves(same.data(), reinterpret_cast<Half*>(same.data()),
                                    static_cast<int64_t>(same.size()));
  const Half* in_place = reinterpret_cast<const Half*>(same.data());
  wrong = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (in_place[i].bits != halves[i].bits) ++wrong;
  }
  CHECK(wrong == 0);
}

TEST_CASE("bulk bfloat16 conversion matches BFloat16's bit for bit", "[runtime][dtype]") {
  std::vector<BFloat16> all(0x10000 + 3);
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = BFloat16::from_bits(static_cast<uint16_t>(i));
  }
  std::vector<float> floats(all.size());
  tessera::detail::bfloat16s_to_floats(all.data(), floats.data(), static_cast<int64_t>(all.size()));
  int wrong = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::bit_cast<uint32_t>(floats[i]) != std::bit_cast<uint32_t>(static_cast<float>(all[i])))
      ++wrong;
  }
  CHECK(wrong == 0);

  const std::vector<float> cases =
      rounding_cases([](uint16_t b) { return static_cast<float>(BFloat16::from_bits(b)); });
  std::vector<BFloat16> out(cases.size());
  tessera::detail::floats_to_bfloat16s(cases.data(), out.data(),
                                       static_cast<int64_t>(cases.size()));
  wrong = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const uint16_t want = BFloat16(cases[i]).bits;
    if (out[i].bits != want && ++wrong <= 5) {
      FAIL_CHECK("float " << cases[i] << ": got 0x" << std::hex << out[i].bits << ", want 0x"
                          << want);
    }
  }
  CHECK(wrong == 0);
}
