// matmul, mm, bmm, linear against naive float64 loops over indices.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"
#include "tests/runtime/matmul_reference.h"

using namespace tessera;
using runtime_test::Expected;
using runtime_test::reference_matmul;

namespace {

// Deterministic operand: floating values in [-1, 1), integers in [-4, 4] (in [0, 3] for uint8).
Tensor make(const Shape& shape, DType dtype, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) / 9007199254740992.0;  // [0, 1)
    if (dtype == kUInt8) {
      x = std::floor(u * 4);
    } else if (is_integral(dtype)) {
      x = std::floor(u * 9) - 4;
    } else {
      x = 2 * u - 1;
    }
  }
  return from_vector<double>(v, shape).to(dtype);
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat64:
      return 1e-12;
    case DType::kFloat32:
      return 1e-5;
    case DType::kFloat16:
      return 2e-3;
    case DType::kBFloat16:
      return 1e-2;
    default:
      return 0;
  }
}

// Checks got against expected elementwise: |got - want| <= tol * magnitude (+ a tiny floor).
void check_values(const Tensor& got, const Expected& want, DType dtype) {
  REQUIRE(got.sizes() == want.shape);
  const std::vector<double> g = got.to_vector<double>();
  REQUIRE(g.size() == want.value.size());
  const double tol = tolerance(dtype);
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < g.size(); ++i) {
    const double allowed = tol * want.magnitude[i] + (tol > 0 ? 1e-30 : 0);
    if (!(std::abs(g[i] - want.value[i]) <= allowed)) {
      if (bad++ == 0) {
        first = "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", want " +
                std::to_string(want.value[i]);
      }
    }
  }
  INFO(dtype << " shape " << got.sizes() << ": " << bad << " mismatches; first " << first);
  CHECK(bad == 0);
}

void check_matmul(const Tensor& a, const Tensor& b) {
  const Tensor out = matmul(a, b);
  CHECK(out.dtype() == a.dtype());
  CHECK(out.is_contiguous());
  check_values(out, reference_matmul(a, b), a.dtype());
}

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32};

}  // namespace

TEST_CASE("matmul follows torch.matmul's shape rules", "[runtime][linalg]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3}, {3}},                    // dot: 0-dim result
      {{2, 3}, {3}},                 // matrix x vector
      {{3}, {3, 4}},                 // vector x matrix
      {{2, 3}, {3, 4}},              // mm
      {{5, 2, 3}, {5, 3, 4}},        // bmm
      {{5, 2, 3}, {3, 4}},           // batch x matrix: folded into one product
      {{5, 2, 3}, {3}},              // batch x vector
      {{3}, {5, 3, 4}},              // vector x batch
      {{2, 3}, {5, 3, 4}},           // matrix x batch: a broadcast over the batch
      {{2, 1, 3, 4}, {5, 4, 2}},     // broadcast batch dims: [2, 5, 3, 2]
      {{2, 3, 4, 5}, {2, 3, 5, 6}},  // 4-D
      {{1, 3, 4}, {2, 5, 4, 2}},     // batch of 1 against a 2-D batch
      {{65, 130}, {130, 33}},        // large enough for blocked and threaded kernels
      {{3, 40, 70}, {70, 50}},
      {{4, 1, 31, 17}, {1, 3, 17, 9}},
  };
  for (DType dtype : kAllDTypes) {
    uint64_t seed = 1;
    for (const auto& [sa, sb] : cases) {
      INFO("a " << sa << " b " << sb << " " << dtype);
      check_matmul(make(sa, dtype, seed), make(sb, dtype, seed + 100));
      ++seed;
    }
  }
  Tensor dot = matmul(make({3}, kFloat32, 1), make({3}, kFloat32, 2));
  CHECK(dot.dim() == 0);
}

TEST_CASE("matmul of transposed, sliced and expanded operands", "[runtime][linalg]") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64}) {
    INFO(dtype);
    // Transposed (column-major) operands, 2-D and batched.
    check_matmul(make({4, 3}, dtype, 1).t(), make({5, 4}, dtype, 2).t());
    check_matmul(make({3, 4}, dtype, 3), make({5, 4}, dtype, 4).t());
    check_matmul(make({2, 5, 3}, dtype, 5).transpose(1, 2),
                 make({2, 4, 5}, dtype, 6).transpose(1, 2));
    check_matmul(make({40, 33}, dtype, 7).t(), make({40, 20}, dtype, 8));
    // Rows with a gap (leading dimension larger than the row), and columns with a step.
    check_matmul(make({8, 6}, dtype, 9).slice(0, 1, 7, 2), make({6, 4}, dtype, 10));
    check_matmul(make({4, 10}, dtype, 11).slice(1, 0, 10, 2), make({5, 3}, dtype, 12));
    check_matmul(make({5, 9}, dtype, 13).narrow(1, 2, 4), make({6, 7}, dtype, 14).narrow(0, 1, 4));
    check_matmul(make({3, 7}, dtype, 15), make({7, 12}, dtype, 16).slice(1, 1, 12, 3));
    // Batches interleaved in memory (batch stride smaller than a matrix).
    check_matmul(make({3, 2, 4}, dtype, 17).permute({1, 0, 2}), make({2, 4, 5}, dtype, 18));
    // Expanded operands: a batch dim broadcast in a, in both, and a row repeated within a matrix.
    check_matmul(make({1, 3, 4}, dtype, 19).expand({6, 3, 4}), make({6, 4, 2}, dtype, 20));
    check_matmul(make({3, 4}, dtype, 21).expand({6, 3, 4}),
                 make({4, 2}, dtype, 22).expand({6, 4, 2}));
    check_matmul(make({1, 4}, dtype, 23).expand({3, 4}), make({4, 2}, dtype, 24));
    check_matmul(make({2, 3, 4}, dtype, 25), make({4, 1}, dtype, 26).expand({4, 5}));
    // Batched a times a matrix: folded into one column-major matrix, and not foldable.
    check_matmul(make({3, 4, 2}, dtype, 27).transpose(0, 1).transpose(1, 2),
                 make({3, 5}, dtype, 28));
    check_matmul(make({4, 3, 2}, dtype, 29).transpose(0, 1), make({2, 5}, dtype, 30));
  }
}

TEST_CASE("matmul of zero-size operands", "[runtime][linalg]") {
  for (DType dtype : {kFloat32, kBFloat16, kFloat64, kInt64}) {
    INFO(dtype);
    check_matmul(make({3, 0}, dtype, 1), make({0, 4}, dtype, 2));  // K == 0: zeros
    check_matmul(make({0, 3}, dtype, 1), make({3, 4}, dtype, 2));
    check_matmul(make({3, 4}, dtype, 1), make({4, 0}, dtype, 2));
    check_matmul(make({0, 2, 3}, dtype, 1), make({0, 3, 4}, dtype, 2));
    check_matmul(make({2, 0, 3}, dtype, 1), make({3, 4}, dtype, 2));
    check_matmul(make({2, 3, 0}, dtype, 1), make({2, 0, 5}, dtype, 2));
    check_matmul(make({0}, dtype, 1), make({0}, dtype, 2));
    CHECK(matmul(make({3, 0}, dtype, 1), make({0, 4}, dtype, 2)).to_vector<double>() ==
          std::vector<double>(12, 0.0));
  }
}

TEST_CASE("matmul promotes mixed dtypes", "[runtime][linalg]") {
  const std::vector<std::tuple<DType, DType, DType>> cases = {
      {kInt64, kFloat32, kFloat32},    {kInt32, kInt64, kInt64}, {kFloat32, kFloat64, kFloat64},
      {kBFloat16, kFloat32, kFloat32}, {kUInt8, kUInt8, kUInt8}, {kFloat16, kBFloat16, kFloat32},
  };
  for (const auto& [da, db, want] : cases) {
    INFO(da << " x " << db);
    const Tensor a = make({3, 5}, da, 1), b = make({5, 2}, db, 2);
    const Tensor out = matmul(a, b);
    CHECK(out.dtype() == want);
    check_values(out, reference_matmul(a, b), want);
  }
}

TEST_CASE("mm and bmm", "[runtime][linalg]") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kInt32}) {
    INFO(dtype);
    const Tensor a = make({3, 4}, dtype, 1), b = make({4, 5}, dtype, 2);
    check_values(mm(a, b), reference_matmul(a, b), dtype);
    check_values(mm(b.t(), a.t()), reference_matmul(b.t(), a.t()), dtype);
    const Tensor x = make({6, 3, 4}, dtype, 3), y = make({6, 4, 5}, dtype, 4);
    check_values(bmm(x, y), reference_matmul(x, y), dtype);
    check_values(bmm(x, y.transpose(1, 2).contiguous().transpose(1, 2)), reference_matmul(x, y),
                 dtype);
  }
}

TEST_CASE("linear is x @ weight.t() + bias", "[runtime][linalg]") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    INFO(dtype);
    const Tensor x = make({2, 3, 4}, dtype, 1);
    const Tensor w = make({5, 4}, dtype, 2);
    const Tensor bias = make({5}, dtype, 3);
    const Expected plain = reference_matmul(x, w.t());
    check_values(linear(x, w), plain, dtype);

    Expected biased = plain;
    const std::vector<double> vb = bias.to_vector<double>();
    for (size_t i = 0; i < biased.value.size(); ++i) {
      biased.value[i] += vb[i % 5];
      biased.magnitude[i] += std::abs(vb[i % 5]);
    }
    const Tensor out = linear(x, w, bias);
    CHECK(out.dtype() == dtype);
    check_values(out, biased, dtype);

    // A weight stored transposed ([in, out] memory, as after .t()) and a 1-D input.
    const Tensor wt = make({4, 5}, dtype, 4).t();
    check_values(linear(x, wt), reference_matmul(x, wt.t()), dtype);
    const Tensor x1 = make({4}, dtype, 5);
    check_values(linear(x1, w), reference_matmul(x1, w.t()), dtype);
  }
  // Integer input with a float weight computes in float32.
  const Tensor xi = make({3, 4}, kInt64, 6);
  const Tensor wf = make({2, 4}, kFloat32, 7);
  const Tensor out = linear(xi, wf);
  CHECK(out.dtype() == kFloat32);
  check_values(out, reference_matmul(xi.to(kFloat32), wf.t()), kFloat32);
}

TEST_CASE("matmul errors name the op and the shapes", "[runtime][linalg]") {
  const Tensor a23 = make({2, 3}, kFloat32, 1), b45 = make({4, 5}, kFloat32, 2);
  CHECK_THROWS_AS(matmul(a23, b45), ShapeError);
  CHECK_THROWS_WITH(matmul(a23, b45),
                    "[matmul] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH(matmul(make({3}, kFloat32, 1), make({4}, kFloat32, 2)),
                    "[matmul] shapes [3] and [4] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH(
      matmul(make({2, 3, 4}, kFloat32, 1), make({3, 4, 5}, kFloat32, 2)),
      Catch::Contains("[matmul]") && Catch::Contains("[2, 3, 4]") && Catch::Contains("[3, 4, 5]"));
  const Tensor scalar = from_vector<float>({1.0f}, Shape{});
  CHECK_THROWS_AS(matmul(scalar, a23), ShapeError);
  CHECK_THROWS_WITH(matmul(a23, scalar),
                    Catch::Contains("[matmul]") && Catch::Contains("dimension"));
  const Tensor flags = make({2, 2}, kFloat32, 3).to(kBool);
  CHECK_THROWS_AS(matmul(flags, flags), DTypeError);
  CHECK_THROWS_WITH(matmul(flags, make({2, 2}, kFloat32, 4)),
                    Catch::Contains("[matmul]") && Catch::Contains("bool"));

  CHECK_THROWS_WITH(mm(make({2, 2, 3}, kFloat32, 1), make({3, 4}, kFloat32, 2)),
                    Catch::Contains("[mm]") && Catch::Contains("2-D"));
  CHECK_THROWS_WITH(mm(a23, b45), "[mm] shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  CHECK_THROWS_WITH(bmm(a23, b45), Catch::Contains("[bmm]") && Catch::Contains("3-D"));
  CHECK_THROWS_WITH(bmm(make({2, 3, 4}, kFloat32, 1), make({3, 4, 5}, kFloat32, 2)),
                    Catch::Contains("[bmm] batch sizes must be equal"));
  CHECK_THROWS_WITH(bmm(make({2, 3, 4}, kFloat32, 1), make({2, 5, 5}, kFloat32, 2)),
                    Catch::Contains("[bmm]") && Catch::Contains("(4 != 5)"));

  CHECK_THROWS_WITH(linear(make({2, 3}, kFloat32, 1), make({5, 4}, kFloat32, 2)),
                    Catch::Contains("[linear]") && Catch::Contains("[5, 4]"));
  CHECK_THROWS_WITH(
      linear(make({2, 4}, kFloat32, 1), make({5, 4}, kFloat32, 2), make({3}, kFloat32, 3)),
      Catch::Contains("[linear]") && Catch::Contains("bias"));
  CHECK_THROWS_WITH(linear(make({2, 4}, kFloat32, 1), make({1, 5, 4}, kFloat32, 2)),
                    Catch::Contains("[linear]") && Catch::Contains("weight"));
  CHECK_THROWS_AS(matmul(a23, Tensor()), Error);
}

TEST_CASE("matmul across thread counts, threads and cached shapes", "[runtime][linalg]") {
  const Tensor a = make({96, 300}, kFloat32, 1), b = make({300, 80}, kFloat32, 2);
  const Expected want = reference_matmul(a, b);
  for (int n : {1, 2, 3}) {
    const IntraOpThreadsGuard threads(n);
    check_values(matmul(a, b), want, kFloat32);
    check_values(matmul(a.to(kFloat64), b.to(kFloat64)), want, kFloat64);
  }

  // The same geometry with new data reuses a cached primitive; more geometries than the cache
  // holds evict and recreate entries.
  for (int round = 0; round < 2; ++round) {
    for (int64_t k = 1; k <= 70; ++k) {
      const Tensor x = make({3, k}, kFloat32, static_cast<uint64_t>(k + round));
      const Tensor y = make({k, 2}, kFloat32, static_cast<uint64_t>(k + 7 * round));
      check_values(matmul(x, y), reference_matmul(x, y), kFloat32);
    }
  }

  // Each thread has its own oneDNN engine, stream and cache.
  std::vector<int> failures(4, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      set_num_threads(1);
      for (int i = 0; i < 20; ++i) {
        const Tensor out = matmul(a, b);
        const std::vector<double> g = out.to_vector<double>();
        for (size_t j = 0; j < g.size(); ++j) {
          if (std::abs(g[j] - want.value[j]) > 1e-5 * want.magnitude[j])
            ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(failures == std::vector<int>(4, 0));
}
