// cat, stack and flatten against references read element by element through the inputs' strides.

#include <catch2/catch.hpp>
#include <type_traits>
#include <vector>

#include "tessera/runtime/dispatch.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Row-major values of any (strided) tensor, read through its strides without copy kernels.
std::vector<double> logical_values(const Tensor& t) {
  std::vector<double> out;
  std::vector<int64_t> idx(static_cast<size_t>(t.dim()), 0);
  const char* base = static_cast<const char*>(t.raw_data());
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < t.dim(); ++d) offset += idx[d] * t.stride(d);
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T v = *reinterpret_cast<const T*>(base + offset * static_cast<int64_t>(sizeof(T)));
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        out.push_back(static_cast<float>(v));
      } else {
        out.push_back(static_cast<double>(v));
      }
    });
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      if (++idx[d] < t.size(d)) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Reference concatenation of row-major value lists along `dim` of the given shapes.
std::vector<double> reference_cat(const std::vector<Tensor>& ts, int64_t dim) {
  const Shape& s0 = ts[0].sizes();
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= s0[d];
  std::vector<double> out;
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ts) vals.push_back(logical_values(t));
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t k = 0; k < ts.size(); ++k) {
      const int64_t block = ts[k].numel() / outer;
      for (int64_t j = 0; j < block; ++j) out.push_back(vals[k][o * block + j]);
    }
  }
  return out;
}

Tensor seq(const Shape& shape, DType dtype, double start = 0) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return from_vector(v, shape).to(dtype);
}

}  // namespace

TEST_CASE("cat along each dim of contiguous and strided inputs", "[shape_ops]") {
  Tensor a = seq({2, 3}, kFloat32);
  Tensor b = seq({1, 3}, kFloat32, 100);
  Tensor c = cat({a, b});
  CHECK(c.sizes() == Shape{3, 3});
  CHECK(c.dtype() == kFloat32);
  CHECK(c.is_contiguous());
  CHECK(logical_values(c) == std::vector<double>{0, 1, 2, 3, 4, 5, 100, 101, 102});

  Tensor t = seq({4, 2}, kFloat32, 10).t();                 // [2, 4] transposed
  Tensor s = seq({2, 10}, kFloat32, 50).slice(1, 1, 9, 3);  // [2, 3] strided
  Tensor e = seq({1, 1}, kFloat32, -1).expand({2, 2});      // [2, 2] broadcast
  Tensor z = zeros({2, 0});                                 // empty along dim 1
  std::vector<Tensor> parts{a, t, s, e, z};
  for (int64_t dim : {int64_t{1}, int64_t{-1}}) {
    Tensor r = cat(parts, dim);
    CHECK(r.sizes() == Shape{2, 12});
    CHECK(logical_values(r) == reference_cat(parts, 1));
  }
  CHECK(logical_values(cat({t.t(), a.t()}, 0)) == reference_cat({t.t(), a.t()}, 0));

  SECTION("3-D inputs along the middle dim") {
    Tensor x = seq({2, 3, 4}, kFloat64);
    Tensor y = seq({2, 4, 3}, kFloat64, 1000).transpose(1, 2).slice(1, 0, 1);  // [2, 1, 4]
    Tensor r = cat({x, y, x}, 1);
    CHECK(r.sizes() == Shape{2, 7, 4});
    CHECK(logical_values(r) == reference_cat({x, y, x}, 1));
  }
  SECTION("a single input is copied, not aliased") {
    Tensor r = cat({a});
    CHECK(!r.is_alias_of(a));
    CHECK(logical_values(r) == logical_values(a));
  }
  SECTION("zero-size results") {
    CHECK(cat({zeros({0, 3}), zeros({0, 3})}).sizes() == Shape{0, 3});
    CHECK(cat({zeros({2, 0}), zeros({2, 0})}, 1).sizes() == Shape{2, 0});
  }
}

TEST_CASE("cat promotes dtypes across its inputs", "[shape_ops]") {
  Tensor i = seq({2}, kInt32, 1);
  Tensor f = seq({2}, kFloat32, 0.5);
  Tensor r = cat({i, f});
  CHECK(r.dtype() == kFloat32);
  CHECK(logical_values(r) == std::vector<double>{1, 2, 0.5, 1.5});
  CHECK(cat({seq({2}, kInt64), seq({1}, kBool, 1)}).dtype() == kInt64);
  CHECK(logical_values(cat({seq({2}, kInt64), seq({1}, kBool, 1)})) ==
        std::vector<double>{0, 1, 1});
  CHECK(cat({seq({2}, kUInt8), seq({2}, kInt32)}).dtype() == kInt32);
  CHECK(cat({seq({2}, kFloat16), seq({2}, kBFloat16)}).dtype() == kFloat32);
  CHECK(cat({seq({2}, kFloat32), seq({2}, kFloat64)}).dtype() == kFloat64);
  CHECK(cat({seq({2}, kBool), seq({2}, kBool)}).dtype() == kBool);
}

TEST_CASE("cat skips legacy 1-D empty tensors", "[shape_ops]") {
  Tensor a = seq({2, 3}, kInt32);
  Tensor r = cat({zeros({0}, kFloat64), a, empty({0}, kInt32)});
  CHECK(r.sizes() == Shape{2, 3});
  CHECK(r.dtype() == kFloat64);  // the skipped tensors still take part in promotion
  CHECK(logical_values(r) == logical_values(a));
  CHECK(cat({zeros({0}), a}, 1).sizes() == Shape{2, 3});
  Tensor all_empty = cat({zeros({0}), zeros({0}, kInt64)}, 3);
  CHECK(all_empty.sizes() == Shape{0});
  CHECK(all_empty.dtype() == kFloat32);
  CHECK(logical_values(cat({seq({3}, kFloat32), zeros({0})})) == std::vector<double>{0, 1, 2});
}

TEST_CASE("cat errors name the tensors and shapes", "[shape_ops]") {
  Tensor a = zeros({2, 3});
  CHECK_THROWS_WITH(cat({}), Catch::Contains("[cat]") && Catch::Contains("non-empty"));
  CHECK_THROWS_AS(cat({a, zeros({2, 4})}), ShapeError);
  CHECK_THROWS_WITH(cat({a, zeros({2, 4})}),
                    Catch::Contains("[cat]") && Catch::Contains("tensor 1") &&
                        Catch::Contains("[2, 3]") && Catch::Contains("[2, 4]"));
  CHECK_THROWS_WITH(cat({a, a, zeros({3, 3})}, 1),
                    Catch::Contains("tensor 2") && Catch::Contains("[3, 3]"));
  CHECK_THROWS_WITH(cat({a, zeros({2, 3, 1})}),
                    Catch::Contains("[cat]") && Catch::Contains("tensor 1") &&
                        Catch::Contains("[2, 3, 1]") && Catch::Contains("dimensions"));
  CHECK_THROWS_WITH(cat({a, zeros({})}), Catch::Contains("[cat]") && Catch::Contains("position 1"));
  CHECK_THROWS_AS(cat({a, a}, 2), IndexError);
  CHECK_THROWS_AS(cat({a, a}, -3), IndexError);
  CHECK_THROWS_WITH(cat({a, Tensor()}), Catch::Contains("tensor 1"));
}

TEST_CASE("stack inserts a new dim", "[shape_ops]") {
  Tensor a = seq({2, 3}, kFloat32);
  Tensor b = seq({3, 2}, kFloat32, 10).t();  // [2, 3], strided
  auto at = [](const std::vector<double>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  const auto va = logical_values(a), vb = logical_values(b);

  Tensor s0 = stack({a, b});
  CHECK(s0.sizes() == Shape{2, 2, 3});
  std::vector<double> expect0 = va;
  expect0.insert(expect0.end(), vb.begin(), vb.end());
  CHECK(logical_values(s0) == expect0);

  Tensor s1 = stack({a, b}, 1);
  CHECK(s1.sizes() == Shape{2, 2, 3});
  std::vector<double> expect1;
  for (int64_t i = 0; i < 2; ++i) {
    for (const auto* v : {&va, &vb}) {
      for (int64_t j = 0; j < 3; ++j) expect1.push_back(at(*v, i * 3 + j));
    }
  }
  CHECK(logical_values(s1) == expect1);

  for (int64_t dim : {int64_t{2}, int64_t{-1}}) {
    Tensor s2 = stack({a, b}, dim);
    CHECK(s2.sizes() == Shape{2, 3, 2});
    std::vector<double> expect2;
    for (int64_t i = 0; i < 6; ++i) {
      expect2.push_back(at(va, i));
      expect2.push_back(at(vb, i));
    }
    CHECK(logical_values(s2) == expect2);
  }

  Tensor scalars = stack({scalar_tensor(1.0), scalar_tensor(2.0), scalar_tensor(3.0)});
  CHECK(scalars.sizes() == Shape{3});
  CHECK(logical_values(scalars) == std::vector<double>{1, 2, 3});
  CHECK(stack({zeros({0}), zeros({0})}).sizes() == Shape{2, 0});
  CHECK(stack({zeros({0}), zeros({0})}, 1).sizes() == Shape{0, 2});
  CHECK(stack({seq({2}, kInt32), seq({2}, kFloat64)}).dtype() == kFloat64);

  CHECK_THROWS_WITH(stack({a, zeros({2, 4})}), Catch::Contains("[stack]") &&
                                                   Catch::Contains("[2, 4]") &&
                                                   Catch::Contains("entry 1"));
  CHECK_THROWS_WITH(stack({}), Catch::Contains("[stack]"));
  CHECK_THROWS_AS(stack({a, a}, 3), IndexError);
  CHECK_THROWS_AS(stack({a, a}, -4), IndexError);
}

TEST_CASE("flatten free function", "[shape_ops]") {
  Tensor a = seq({2, 3, 4}, kFloat32);
  CHECK(flatten(a).sizes() == Shape{24});
  CHECK(flatten(a).is_alias_of(a));
  CHECK(flatten(a, 1).sizes() == Shape{2, 12});
  CHECK(flatten(a, 0, 1).sizes() == Shape{6, 4});
  CHECK(flatten(a, -2, -1).sizes() == Shape{2, 12});
  CHECK(flatten(scalar_tensor(5.0)).sizes() == Shape{1});
  Tensor t = a.transpose(0, 2);  // [4, 3, 2]
  Tensor f = flatten(t);
  CHECK(logical_values(f) == logical_values(t));
  CHECK_THROWS_WITH(flatten(a, 2, 0), Catch::Contains("[flatten]"));
  CHECK_THROWS_AS(flatten(a, 3), IndexError);
}
