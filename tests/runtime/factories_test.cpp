// Factories: shapes, dtypes and values against expected values written out here, and errors.

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

TEST_CASE("empty, zeros, ones and full", "[factories]") {
  Tensor e = empty({2, 3});
  CHECK(e.sizes() == Shape{2, 3});
  CHECK(e.strides() == Shape{3, 1});
  CHECK(e.dtype() == kFloat32);
  CHECK(e.device() == Device::cpu());
  CHECK(e.is_contiguous());
  CHECK(empty({4}, kInt32).dtype() == kInt32);

  for (DType dt : {kBool, kUInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    INFO(dt);
    Tensor z = zeros({3, 2}, dt);
    CHECK(z.dtype() == dt);
    CHECK(values(z) == std::vector<double>(6, 0.0));
    Tensor o = ones({2, 2, 2}, dt);
    CHECK(o.sizes() == Shape{2, 2, 2});
    CHECK(values(o) == std::vector<double>(8, 1.0));
  }
  CHECK(values(full({2, 2}, 2.5)) == std::vector<double>(4, 2.5));
  CHECK(values(full({3}, -7, kInt64)) == std::vector<double>(3, -7.0));
  CHECK(values(full({2}, 2.75, kInt32)) == std::vector<double>(2, 2.0));  // truncates
  CHECK(values(full({2}, true, kBool)) == std::vector<double>(2, 1.0));
  CHECK(values(full({2}, 0.1, kFloat64)) == std::vector<double>(2, 0.1));
  CHECK(full({1}, 0.1).item<float>() == 0.1f);
  CHECK(values(full({1}, 65504.0, kFloat16)) == std::vector<double>{65504.0});

  SECTION("zero-size and 0-dim shapes") {
    CHECK(zeros({0, 3}).numel() == 0);
    CHECK(ones({2, 0}).sizes() == Shape{2, 0});
    Tensor s = full({}, 4.0);
    CHECK(s.dim() == 0);
    CHECK(s.item<float>() == 4.0f);
  }
  SECTION("requires_grad is accepted") {
    CHECK(values(zeros({2}, TensorOptions().requires_grad(true))) == std::vector<double>{0, 0});
  }
  SECTION("negative sizes are errors naming the op") {
    CHECK_THROWS_AS(empty({2, -1}), ShapeError);
    CHECK_THROWS_WITH(zeros({-2}), Catch::Contains("[zeros]") && Catch::Contains("[-2]"));
    CHECK_THROWS_WITH(ones({1, -1}), Catch::Contains("[ones]"));
    CHECK_THROWS_WITH(full({-1}, 1.0), Catch::Contains("[full]"));
  }
}

TEST_CASE("*_like factories copy shape, dtype and device, contiguously", "[factories]") {
  Tensor base = arange(0, 12, 1, kFloat64).reshape({3, 4});
  for (const Tensor& t : {base.t(), base.slice(1, 0, 4, 2), base.select(0, 1).expand({5, 4})}) {
    INFO(t.sizes());
    Tensor e = empty_like(t);
    CHECK(e.sizes() == t.sizes());
    CHECK(e.dtype() == kFloat64);
    CHECK(e.is_contiguous());
    CHECK(!e.is_alias_of(t));
    CHECK(values(zeros_like(t)) == std::vector<double>(t.numel(), 0.0));
    CHECK(values(ones_like(t)) == std::vector<double>(t.numel(), 1.0));
    CHECK(values(full_like(t, -1.5)) == std::vector<double>(t.numel(), -1.5));
    CHECK(zeros_like(t).is_contiguous());
  }
  Tensor i = full({2}, 3, kInt32);
  CHECK(full_like(i, 2.9).dtype() == kInt32);
  CHECK(values(full_like(i, 2.9)) == std::vector<double>{2, 2});
  CHECK(zeros_like(zeros({0, 2})).sizes() == Shape{0, 2});
}

TEST_CASE("arange infers int64 from integral arguments and follows PyTorch's size rule",
          "[factories]") {
  Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(values(a) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(arange(5.0).dtype() == kFloat32);
  CHECK(values(arange(5.0)) == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(arange(5, kFloat32).dtype() == kFloat32);
  CHECK(arange(5, TensorOptions(kInt32)).dtype() == kInt32);
  CHECK(arange(5, TensorOptions(kFloat64)).dtype() == kFloat64);
  CHECK(arange(2.5).dtype() == kFloat32);
  CHECK(values(arange(2.5)) == std::vector<double>{0, 1, 2});

  CHECK(values(arange(1, 10, 3)) == std::vector<double>{1, 4, 7});
  CHECK(arange(1, 10, 3).dtype() == kInt64);
  CHECK(values(arange(1, 11, 3)) == std::vector<double>{1, 4, 7, 10});
  CHECK(values(arange(10, 0, -3)) == std::vector<double>{10, 7, 4, 1});
  CHECK(values(arange(-3, 3, 2)) == std::vector<double>{-3, -1, 1});
  CHECK(arange(3, 3).numel() == 0);
  CHECK(arange(3, 3).dtype() == kInt64);
  CHECK(values(arange(0, 1, 0.25)) == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(arange(0, 1, 0.25).dtype() == kFloat32);
  CHECK(values(arange(-1.5, 1.5, 1)) == std::vector<double>{-1.5, -0.5, 0.5});
  CHECK(values(arange(0, 5, 2, kFloat64)) == std::vector<double>{0, 2, 4});
  CHECK(values(arange(0, 5, 1.5, kInt64)) == std::vector<double>{0, 1, 2, 3, 4});  // step 1
  CHECK(values(arange(0, 4, 1, kUInt8)) == std::vector<double>{0, 1, 2, 3});
  CHECK(values(arange(0.5, 2, 1, kFloat16)) == std::vector<double>{0.5, 1.5});

  SECTION("size is ceil((end - start) / step), values start + i * step in double") {
    Tensor t = arange(0.0, 1.0, 0.1);
    REQUIRE(t.numel() == 10);
    auto v = t.to_vector<float>();
    for (int64_t i = 0; i < 10; ++i) CHECK(v[i] == static_cast<float>(i * 0.1));
    CHECK(arange(0.0, 1.05, 0.1).numel() == 11);
    Tensor d = arange(1.0, -1.0, -0.3, kFloat64);
    REQUIRE(d.numel() == 7);
    auto dv = d.to_vector<double>();
    for (int64_t i = 0; i < 7; ++i) CHECK(dv[i] == 1.0 + static_cast<double>(i) * -0.3);
  }
  SECTION("int64 values beyond 2^53 stay exact") {
    const int64_t big = (int64_t{1} << 60);
    CHECK(arange(big, big + 3).to_vector<int64_t>() == std::vector<int64_t>{big, big + 1, big + 2});
  }
  SECTION("large fills are parallel and exact") {
    auto v = arange(0, 300000, 1).to_vector<int64_t>();
    bool ok = true;
    for (int64_t i = 0; i < 300000; ++i) ok = ok && v[i] == i;
    CHECK(ok);
  }
  SECTION("errors") {
    CHECK_THROWS_WITH(arange(0, 5, 0), Catch::Contains("[arange]") && Catch::Contains("nonzero"));
    CHECK_THROWS_WITH(arange(0, 5, -1), Catch::Contains("[arange]") && Catch::Contains("sign"));
    CHECK_THROWS_WITH(arange(5, 0, 1), Catch::Contains("sign"));
    CHECK_THROWS_WITH(arange(0.0, 1.0, -0.5), Catch::Contains("sign"));
    CHECK_THROWS_WITH(arange(0, 2.5, 0.5, kInt64), Catch::Contains("nonzero"));
    CHECK_THROWS_WITH(arange(0.0, std::numeric_limits<double>::infinity()),
                      Catch::Contains("[arange]"));
    CHECK_THROWS_AS(arange(0, 5, 1, kBool), DTypeError);
  }
}

TEST_CASE("linspace and logspace", "[factories]") {
  CHECK(values(linspace(0, 1, 5)) == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  CHECK(linspace(0, 1, 5).dtype() == kFloat32);
  CHECK(values(linspace(3, 7, 1)) == std::vector<double>{3});
  CHECK(linspace(0, 1, 0).numel() == 0);
  CHECK(values(linspace(10, 0, 3)) == std::vector<double>{10, 5, 0});
  CHECK(values(linspace(0, 10, 4, kInt64)) == std::vector<double>{0, 3, 6, 10});
  CHECK(values(linspace(-1, 1, 4, kInt32)) == std::vector<double>{-1, 0, 0, 1});

  SECTION("float32 values counted from both ends") {
    auto v = linspace(-1, 1, 4).to_vector<float>();
    const float step = 2.0f / 3.0f;
    CHECK(v == std::vector<float>{-1.0f, -1.0f + step, 1.0f - step, 1.0f});
  }
  SECTION("float64 steps of 0.1 end exactly at 1") {
    auto v = linspace(0, 1, 11, kFloat64).to_vector<double>();
    REQUIRE(v.size() == 11);
    for (int64_t i = 0; i < 11; ++i) CHECK(v[i] == Approx(0.1 * static_cast<double>(i)));
    CHECK(v.back() == 1.0);
    CHECK(v[5] == 0.5);
  }
  SECTION("logspace") {
    CHECK(values(logspace(0, 4, 5, 2.0)) == std::vector<double>{1, 2, 4, 8, 16});
    auto v = logspace(0, 3, 4).to_vector<double>();
    REQUIRE(v.size() == 4);
    CHECK(v[0] == 1.0);
    CHECK(v[1] == Approx(10.0));
    CHECK(v[2] == Approx(100.0));
    CHECK(v[3] == Approx(1000.0));
    CHECK(values(logspace(0, 2, 3, 10.0, kInt64)) == std::vector<double>{1, 10, 100});
    CHECK(values(logspace(1, 1, 1, 3.0, kFloat64)) == std::vector<double>{3});
    CHECK(logspace(0, 1, 0).numel() == 0);
  }
  SECTION("errors") {
    CHECK_THROWS_WITH(linspace(0, 1, -1), Catch::Contains("[linspace]") && Catch::Contains("-1"));
    CHECK_THROWS_WITH(logspace(0, 1, -2), Catch::Contains("[logspace]"));
    CHECK_THROWS_AS(linspace(0, 1, 3, kBool), DTypeError);
  }
}

TEST_CASE("eye and scalar_tensor", "[factories]") {
  CHECK(values(eye(3)) == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(eye(3).sizes() == Shape{3, 3});
  CHECK(eye(3).dtype() == kFloat32);
  CHECK(values(eye(2, 4)) == std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0});
  CHECK(values(eye(3, 1)) == std::vector<double>{1, 0, 0});
  CHECK(eye(0).sizes() == Shape{0, 0});
  CHECK(eye(2, 0).sizes() == Shape{2, 0});
  Tensor b = eye(2, std::nullopt, kBool);
  CHECK(b.dtype() == kBool);
  CHECK(values(b) == std::vector<double>{1, 0, 0, 1});
  CHECK(values(eye(2, 3, kInt64)) == std::vector<double>{1, 0, 0, 0, 1, 0});
  CHECK_THROWS_WITH(eye(-1), Catch::Contains("[eye]") && Catch::Contains("-1"));
  CHECK_THROWS_WITH(eye(2, -3), Catch::Contains("[eye]") && Catch::Contains("-3"));

  Tensor f = scalar_tensor(2.5);
  CHECK(f.dim() == 0);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.item<double>() == 2.5);
  CHECK(scalar_tensor(3).dtype() == kInt64);
  CHECK(scalar_tensor(3).item<int64_t>() == 3);
  CHECK(scalar_tensor(true).dtype() == kBool);
  CHECK(scalar_tensor(0.1, kFloat64).item<double>() == 0.1);
}
