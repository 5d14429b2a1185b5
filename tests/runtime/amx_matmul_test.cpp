// The AMX bfloat16 kernels (kernels/cpu/amx_matmul.h) against float64 loops over the same
// bfloat16 values: every tile edge, depth block, column block and layout, batches, 1 and 2
// threads; and tessera::matmul on a product the kernels are preferred for.

#include "tessera/kernels/cpu/amx_matmul.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/kernels/cpu/omp_threads.h"
#include "tessera/tessera.h"
#include "tests/runtime/matmul_reference.h"

using namespace tessera;
using runtime_test::Expected;
using runtime_test::reference_matmul;

namespace {

// Values in [-1, 1), rounded to bfloat16.
Tensor make_bf16(const Shape& shape, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(s >> 40) / 8388608.0 - 1.0);
  }
  return from_vector<float>(v, shape).to(kBFloat16);
}

// Whether got (bfloat16) is want rounded once to bfloat16 after a float32 sum: half a bfloat16
// ulp of the value (2^-9 relative) plus float32 accumulation over the terms' magnitudes.
bool close_to(double got, double want, double magnitude) {
  return std::abs(got - want) <= std::ldexp(std::abs(want), -8) + 1e-5 * magnitude + 1e-30;
}

int64_t mismatches(const Tensor& out, const Expected& want) {
  const std::vector<double> got = out.to_vector<double>();
  if (got.size() != want.value.size()) return -1;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!close_to(got[i], want.value[i], want.magnitude[i])) ++bad;
  }
  return bad;
}

const char* const kNoAmx =
    "skipped: the AMX kernels need x86-64 Linux with AMX-TILE, AMX-BF16 and AVX512-BF16 and the "
    "kernel's grant of the tile state, which this machine lacks (bfloat16 products run on oneDNN)";

}  // namespace

TEST_CASE("the AMX bfloat16 kernels on every tile edge, block and layout",
          "[runtime][linalg][gemm]") {
  if (!cpu::amx_bf16_matmul_available()) {
    WARN(kNoAmx);
    return;
  }
  struct Dims {
    int64_t m, n, k;
  };
  std::vector<Dims> dims;
  for (int64_t m : {1, 15, 16, 17, 31, 32, 33, 47, 64}) dims.push_back({m, 40, 45});  // row tiles
  for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 48, 70}) dims.push_back({35, n, 50});  // columns
  for (int64_t k : {1, 2, 31, 32, 33, 64, 255, 256, 257, 300, 600}) dims.push_back({33, 34, k});
  // Deep enough that b's column block (half the L2 over K) is narrower than the product: two or
  // more blocks of columns, the last ragged.
  dims.push_back({20, 300, 4096});
  uint64_t seed = 900;
  for (int threads : {1, 2}) {
    const cpu::OmpThreadsGuard guard(threads);  // the kernels are called directly
    for (const Dims& d : dims) {
      const Tensor a = make_bf16({d.m, d.k}, ++seed), a_col = make_bf16({d.k, d.m}, ++seed).t();
      const Tensor b = make_bf16({d.k, d.n}, ++seed), b_col = make_bf16({d.n, d.k}, ++seed).t();
      for (const auto& [x, y] : {std::pair{a, b}, {a, b_col}, {a_col, b}, {a_col, b_col}}) {
        INFO(threads << " thread(s), " << d.m << " x " << d.k << " @ " << d.k << " x " << d.n
                     << ", a strides " << x.strides() << ", b strides " << y.strides());
        const Tensor out = Tensor::make_empty({d.m, d.n}, kBFloat16, Device::cpu());
        REQUIRE(cpu::amx_bf16_matmul(out, x, y));
        CHECK(mismatches(out, reference_matmul(x, y)) == 0);
      }
    }
  }
}

TEST_CASE("the AMX bfloat16 kernels on batches, threads splitting one product's rows",
          "[runtime][linalg][gemm]") {
  if (!cpu::amx_bf16_matmul_available()) {
    WARN(kNoAmx);
    return;
  }
  for (int threads : {1, 2}) {
    const cpu::OmpThreadsGuard guard(threads);  // the kernels are called directly
    // One batch of three (whole products per thread) and one product of 97 rows (cut in two).
    for (const auto& [a, b] : {std::pair{make_bf16({3, 50, 70}, 1), make_bf16({3, 70, 40}, 2)},
                               {make_bf16({97, 65}, 3), make_bf16({65, 33}, 4)}}) {
      INFO(threads << " thread(s), " << a.sizes() << " @ " << b.sizes());
      Shape shape = a.sizes();
      shape.back() = b.size(-1);
      const Tensor out = Tensor::make_empty(shape, kBFloat16, Device::cpu());
      REQUIRE(cpu::amx_bf16_matmul(out, a, b));
      CHECK(mismatches(out, reference_matmul(a, b)) == 0);
    }
  }
}

TEST_CASE("a bfloat16 matmul the AMX kernels are preferred for", "[runtime][linalg][gemm]") {
  const int64_t m = 256, k = 1024, n = 2048;
  if (!cpu::amx_bf16_preferred(m, n, k, 1, 1)) {
    WARN("skipped: " << m << " x " << k << " @ " << k << " x " << n
                     << " does not go to the AMX kernels here ("
                     << (cpu::amx_bf16_matmul_available() ? "the rule prefers oneDNN"
                                                          : "no AMX on this machine")
                     << ")");
    return;
  }
  const IntraOpThreadsGuard guard(1);
  const Tensor a = make_bf16({m, k}, 11), b = make_bf16({k, n}, 12);
  const Tensor out = matmul(a, b);
  // Rows sampled from both ends and the middle: the full float64 reference would be 2^29 terms.
  for (int64_t row : {int64_t{0}, int64_t{1}, m / 2, m - 1}) {
    INFO("row " << row);
    const Tensor a_row = a.narrow(0, row, 1);
    CHECK(mismatches(out.narrow(0, row, 1), reference_matmul(a_row, b)) == 0);
  }
}
