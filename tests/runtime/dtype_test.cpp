#include <catch2/catch.hpp>
#include <cfenv>
#include <cmath>
#include <cstring>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Independent reference: round a double to the nearest representable value of a binary format with
// `mant_bits` explicit mantissa bits and exponent range [emin, emax], ties to even (saturating to
// inf).
double round_to_format(double v, int mant_bits, int emin, int emax) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e;
  std::frexp(std::abs(v), &e);  // |v| = m * 2^e with m in [0.5, 1)
  int exp = std::max(e - 1, emin);
  double ulp = std::ldexp(1.0, exp - mant_bits);
  double r = std::nearbyint(v / ulp) * ulp;  // default rounding mode: to nearest even
  double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -mant_bits), emax);
  if (std::abs(r) > max_finite) return std::copysign(INFINITY, v);
  return r;
}

}  // namespace

TEST_CASE("float16 conversion rounds to nearest even", "[runtime][dtype]") {
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(Half(65504.0f).bits == 0x7bff);
  CHECK(Half(65519.0f).bits == 0x7bff);
  CHECK(Half(65520.0f).bits == 0x7c00);
  CHECK(Half(std::ldexp(1.0f, -24)).bits == 0x0001);
  CHECK(Half(std::ldexp(1.0f, -25)).bits == 0x0000);         // tie to even (zero)
  CHECK(Half(3 * std::ldexp(1.0f, -26)).bits == 0x0001);     // 0.75 ulp rounds up
  CHECK(Half(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie to even
  CHECK(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3c02);
  CHECK(Half(-2.0f).bits == 0xc000);
  CHECK(std::isnan(static_cast<float>(Half(NAN))));

  // Every finite half survives half -> float -> half, and matches the reference value.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    Half h = Half::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) continue;
    REQUIRE(Half(f).bits == b);
  }
  // Floats between halves round like the reference (sampled over the whole range).
  for (uint32_t x = 0; x < 0x47800000u; x += 0x3f1) {
    float f;
    std::memcpy(&f, &x, 4);
    double want = round_to_format(f, 10, -14, 15);
    REQUIRE(static_cast<double>(static_cast<float>(Half(f))) == want);
    REQUIRE(static_cast<double>(static_cast<float>(Half(-f))) == -want);
  }
}

TEST_CASE("bfloat16 conversion rounds to nearest even", "[runtime][dtype]") {
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);      // tie to even
  CHECK(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3f82);  // tie to even (up)
  CHECK(std::isnan(static_cast<float>(BFloat16(NAN))));
  for (uint32_t x = 0; x < 0x7f7f0000u; x += 0x1f3f1) {
    float f;
    std::memcpy(&f, &x, 4);
    double want = round_to_format(f, 7, -126, 127);
    REQUIRE(static_cast<double>(static_cast<float>(BFloat16(f))) == want);
  }
}

TEST_CASE("dtype names and sizes", "[runtime][dtype]") {
  CHECK(element_size(kBool) == 1);
  CHECK(element_size(kUInt8) == 1);
  CHECK(element_size(kInt32) == 4);
  CHECK(element_size(kInt64) == 8);
  CHECK(element_size(kFloat16) == 2);
  CHECK(element_size(kBFloat16) == 2);
  CHECK(element_size(kFloat32) == 4);
  CHECK(element_size(kFloat64) == 8);
  CHECK(fmt::format("{}", kBFloat16) == "bfloat16");
  CHECK(is_floating_point(kFloat16));
  CHECK(!is_floating_point(kInt64));
}

TEST_CASE("dtype conversion through copy", "[runtime][dtype]") {
  Tensor f = from_vector<float>({-1.5f, 0.0f, 2.75f, 1e9f}, {4});
  CHECK(f.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 2, 1000000000});
  CHECK(f.to(kBool).to_vector<bool>() == std::vector<bool>{true, false, true, true});
  CHECK(f.to(kBFloat16).to(kFloat32).to_vector<float>() ==
        std::vector<float>{-1.5f, 0.0f, 2.75f, static_cast<float>(BFloat16(1e9f))});
  CHECK(f.to(kFloat16).to_vector<float>()[3] == INFINITY);
}
