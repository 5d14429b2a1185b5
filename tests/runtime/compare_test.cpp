#include <catch2/catch.hpp>
#include <limits>

#include "tessera/tessera.h"

using namespace tessera;

namespace {
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("allclose uses |a - b| <= atol + rtol * |b|", "[runtime][compare]") {
  const Tensor a = from_vector<float>({1.0f, 100.0f, 0.0f}, {3});
  CHECK(allclose(a, a));
  CHECK(allclose(a, from_vector<float>({1.000005f, 100.0005f, 5e-9f}, {3})));
  CHECK_FALSE(allclose(a, from_vector<float>({1.0001f, 100.0f, 0.0f}, {3})));
  CHECK_FALSE(allclose(a, from_vector<float>({1.0f, 100.0f, 1e-7f}, {3})));
  CHECK(allclose(a, from_vector<float>({1.1f, 100.0f, 0.0f}, {3}), 0.2, 0.0));
  CHECK(allclose(a, from_vector<float>({1.5f, 100.5f, 0.5f}, {3}), 0.0, 0.5));
  // Asymmetric: the tolerance scales with |b|.
  const Tensor x = from_vector<double>({1.0}, {1}), y = from_vector<double>({2.0}, {1});
  CHECK(allclose(x, y, 0.5, 0.0));
  CHECK_FALSE(allclose(y, x, 0.5, 0.0));
}

TEST_CASE("allclose handles NaN, infinities, broadcasting and views", "[runtime][compare]") {
  const Tensor n = from_vector<float>({1.0f, kNan}, {2});
  CHECK_FALSE(allclose(n, n));
  CHECK(allclose(n, n, 1e-5, 1e-8, true));
  CHECK_FALSE(allclose(n, from_vector<float>({1.0f, 2.0f}, {2}), 1e-5, 1e-8, true));
  const Tensor i = from_vector<float>({kInf, -kInf}, {2});
  CHECK(allclose(i, i));
  CHECK_FALSE(allclose(i, from_vector<float>({kInf, kInf}, {2})));
  CHECK_FALSE(allclose(i, from_vector<float>({3e38f, -3e38f}, {2}), 1.0, 1.0));
  // [2, 3] against a broadcast row, and a transposed view against its copy.
  const Tensor m = from_vector<float>({1, 2, 3, 1, 2, 3}, {2, 3});
  CHECK(allclose(m, from_vector<float>({1, 2, 3}, {3})));
  CHECK_FALSE(allclose(m, from_vector<float>({1, 2, 4}, {3})));
  CHECK(allclose(m.t(), m.t().contiguous()));
  CHECK(allclose(from_vector<float>({}, {0, 3}), from_vector<float>({}, {0, 3})));
  CHECK(allclose(from_vector<float>({2}, {}), from_vector<float>({2, 2}, {2})));
}

TEST_CASE("allclose on integers and reduced floats", "[runtime][compare]") {
  const int64_t big = (int64_t{1} << 60) + 1;
  const Tensor a = from_vector<int64_t>({big}, {1});
  CHECK(allclose(a, a, 0.0, 0.0));
  CHECK_FALSE(allclose(a, from_vector<int64_t>({big - 1}, {1}), 0.0, 0.0));
  CHECK(allclose(a, from_vector<int64_t>({big - 1}, {1}), 0.0, 1.0));
  const Tensor bl = from_vector<bool>({true, false}, {2});
  CHECK(allclose(bl, bl));
  CHECK_FALSE(allclose(bl, logical_not(bl)));
  const Tensor h = from_vector<float>({1.0f, 2.0f}, {2}).to(kBFloat16);
  CHECK(allclose(h, h + 0.0078125, 1e-2, 0.0));
  CHECK_FALSE(allclose(h, h + 0.25, 1e-2, 0.0));
}

TEST_CASE("allclose errors name the op and the dtypes", "[runtime][compare]") {
  const Tensor f = from_vector<float>({1}, {1});
  const Tensor d = from_vector<double>({1}, {1});
  CHECK_THROWS_AS(allclose(f, d), DTypeError);
  CHECK_THROWS_WITH(allclose(f, d), Catch::Contains("[allclose]") && Catch::Contains("float32") &&
                                        Catch::Contains("float64"));
  CHECK_THROWS_WITH(
      allclose(from_vector<float>({1, 2}, {2}), from_vector<float>({1, 2, 3}, {3})),
      Catch::Contains("[allclose]") && Catch::Contains("[2]") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(allclose(f, f, -1.0), Catch::Contains("[allclose]"));
}

TEST_CASE("equal needs equal shapes and equal values", "[runtime][compare]") {
  const Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  CHECK(equal(a, a));
  CHECK(equal(a, a.t().contiguous().t()));
  CHECK_FALSE(equal(a, a.t()));
  CHECK_FALSE(equal(a, a.reshape({4})));
  CHECK_FALSE(equal(a, from_vector<float>({1, 2, 3, 5}, {2, 2})));
  // Values compare after promotion: dtypes may differ.
  CHECK(equal(a, from_vector<int64_t>({1, 2, 3, 4}, {2, 2})));
  CHECK_FALSE(equal(a, from_vector<double>({1, 2, 3, 4.5}, {2, 2})));
  // NaN is never equal to itself.
  const Tensor n = from_vector<float>({kNan}, {1});
  CHECK_FALSE(equal(n, n));
  CHECK(equal(from_vector<float>({}, {0}), from_vector<float>({}, {0})));
  CHECK_FALSE(equal(from_vector<float>({}, {0}), from_vector<float>({}, {0, 1})));
  // A long tensor that differs only in its last element.
  std::vector<double> v(5000, 1.0);
  const Tensor x = from_vector<double>(v, {5000});
  v.back() = 2.0;
  CHECK_FALSE(equal(x, from_vector<double>(v, {5000})));
  CHECK(equal(x, x.to(kBFloat16)));
}
