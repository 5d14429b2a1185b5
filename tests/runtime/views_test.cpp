#include <catch2/catch.hpp>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

Tensor iota(const Shape& s) {
  std::vector<double> v(static_cast<size_t>(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return from_vector<double>(v, s);
}

// Reference element at a multi-index of a contiguous iota of shape `s`.
double at(const Shape& s, const std::vector<int64_t>& idx) {
  double flat = 0;
  for (size_t d = 0; d < s.size(); ++d) flat = flat * static_cast<double>(s[d]) + idx[d];
  return flat;
}

std::vector<int64_t> sizes_of(const std::vector<Tensor>& ts, int64_t dim) {
  std::vector<int64_t> out;
  for (const auto& t : ts) out.push_back(t.size(dim));
  return out;
}

}  // namespace

TEST_CASE("chunk and split follow torch.chunk", "[runtime][views]") {
  CHECK(sizes_of(iota({5, 2}).chunk(4), 0) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes_of(iota({6, 2}).chunk(4), 0) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes_of(iota({8}).chunk(4), 0) == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(sizes_of(iota({3}).chunk(5), 0) == std::vector<int64_t>{1, 1, 1});
  CHECK(sizes_of(iota({0, 3}).chunk(4), 0) == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(sizes_of(iota({2, 7}).chunk(3, 1), 1) == std::vector<int64_t>{3, 3, 1});
  CHECK(sizes_of(iota({7}).split(3), 0) == std::vector<int64_t>{3, 3, 1});
  CHECK(sizes_of(iota({7}).split(std::vector<int64_t>{1, 0, 6}), 0) ==
        std::vector<int64_t>{1, 0, 6});
  auto parts = iota({5, 2}).chunk(4);
  CHECK(parts[2].to_vector<double>() == std::vector<double>{8, 9});
  CHECK_THROWS_WITH(iota({7}).split(std::vector<int64_t>{1, 2}), Catch::Contains("[split]"));
  CHECK_THROWS_WITH(iota({7}).chunk(0), Catch::Contains("[chunk]"));
}

TEST_CASE("views share storage and read the right elements", "[runtime][views]") {
  Shape s{2, 3, 4};
  Tensor a = iota(s);
  Tensor p = a.permute({2, 0, 1});
  REQUIRE(p.sizes() == Shape{4, 2, 3});
  CHECK(p.is_alias_of(a));
  auto pc = p.contiguous().to_vector<double>();
  size_t k = 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t l = 0; l < 3; ++l) CHECK(pc[k++] == at(s, {j, l, i}));

  Tensor sl = a.slice(2, 1, 4, 2);  // columns 1 and 3
  REQUIRE(sl.sizes() == Shape{2, 3, 2});
  auto sv = sl.contiguous().to_vector<double>();
  k = 0;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t l : {1, 3}) CHECK(sv[k++] == at(s, {i, j, l}));

  CHECK(a.select(1, -1).contiguous().to_vector<double>() ==
        std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23});
  CHECK(a.narrow(0, 1, 1).sizes() == Shape{1, 3, 4});
  CHECK(a.narrow(0, 1, 1).storage_offset() == 12);
  CHECK(a.unsqueeze(1).sizes() == Shape{2, 1, 3, 4});
  CHECK(a.unsqueeze(-1).sizes() == Shape{2, 3, 4, 1});
  CHECK(a.unsqueeze(1).squeeze().sizes() == s);
  CHECK(a.unsqueeze(0).squeeze(0).sizes() == s);
  CHECK(a.squeeze(1).sizes() == s);
  CHECK(a.flatten().sizes() == Shape{24});
  CHECK(a.flatten(1).sizes() == Shape{2, 12});
  CHECK(a.unbind(1).size() == 3);
  CHECK(a.unbind(1)[2].contiguous().to_vector<double>() ==
        std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23});

  Tensor e = iota({3, 1}).expand({2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.contiguous().to_vector<double>()[5] == 1);
  CHECK(iota({3}).expand({2, -1}).sizes() == Shape{2, 3});
}

TEST_CASE("view and reshape", "[runtime][views]") {
  Tensor a = iota({4, 6});
  CHECK(a.view({2, -1, 3}).sizes() == Shape{2, 4, 3});
  CHECK(a.view({2, -1, 3}).is_alias_of(a));
  Tensor t = a.t();
  CHECK_THROWS_AS(t.view({24}), ShapeError);
  CHECK_THROWS_WITH(t.view({24}), Catch::Contains("[view]") && Catch::Contains("use reshape"));
  Tensor r = t.reshape({24});
  CHECK(!r.is_alias_of(a));
  CHECK(r.to_vector<double>()[1] == 6);
  // A transposed view that keeps its merged dims contiguous still views without a copy.
  Tensor b = iota({2, 3, 4}).transpose(0, 1);  // [3, 2, 4]
  CHECK(b.reshape({3, 8}).is_alias_of(b) == false);
  CHECK(b.reshape({3, 2, 2, 2}).is_alias_of(b));
  CHECK_THROWS_WITH(a.view({5, 5}), Catch::Contains("[view]") && Catch::Contains("[4, 6]"));
  CHECK_THROWS_WITH(a.view({-1, -1}), Catch::Contains("only one dimension can be -1"));
  CHECK(iota({0, 3}).view({3, 0}).sizes() == Shape{3, 0});
  CHECK(iota({}).view({1, 1}).sizes() == Shape{1, 1});
}

TEST_CASE("bad dims and bad views raise errors naming the op", "[runtime][views]") {
  Tensor a = iota({2, 3});
  CHECK_THROWS_AS(a.transpose(0, 2), IndexError);
  CHECK_THROWS_WITH(a.transpose(0, 2),
                    Catch::Contains("[transpose]") && Catch::Contains("[-2, 1]"));
  CHECK_THROWS_WITH(a.select(1, 3), Catch::Contains("[select] index 3 out of range"));
  CHECK_THROWS_WITH(a.narrow(1, 2, 2), Catch::Contains("[narrow]"));
  CHECK_THROWS_WITH(a.permute({0, 0}), Catch::Contains("[permute]"));
  CHECK_THROWS_WITH(a.permute({0}), Catch::Contains("[permute]"));
  CHECK_THROWS_WITH(a.expand({4, 3}), Catch::Contains("[expand]") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(a.expand({3}), Catch::Contains("[expand]"));
  CHECK_THROWS_WITH(iota({2, 3, 4}).t(), Catch::Contains("[t]"));
  CHECK_THROWS_WITH(a.size(2), Catch::Contains("[size]"));
  CHECK_THROWS_WITH(a.item(), Catch::Contains("[item]"));
  CHECK_THROWS_AS(a.data_ptr<float>(), DTypeError);
  CHECK_THROWS_WITH(Tensor().dim(), Catch::Contains("undefined"));
}

TEST_CASE("copy_ from a source sharing the destination's memory reads it before writing",
          "[runtime][views]") {
  // Each expected value comes from a clone of the source taken before the copy.
  for (const int64_t n : {4, 300}) {  // 300: the tiled transposed copy, several tiles
    Tensor a = iota({n, n});
    const Tensor transposed = a.t().clone();
    a.copy_(a.t());  // in-place transpose
    CHECK(equal(a, transposed));
    Tensor b = iota({n, n});
    const Tensor shifted = b.narrow(0, 0, n - 1).clone();
    b.narrow(0, 1, n - 1).copy_(b.narrow(0, 0, n - 1));  // rows down by one, overlapping
    CHECK(equal(b.narrow(0, 1, n - 1), shifted));
    CHECK(equal(b.select(0, 0), iota({n, n}).select(0, 0)));
  }
  Tensor x = iota({10});
  x.narrow(0, 0, 9).copy_(x.narrow(0, 1, 9));  // left by one, the other direction
  CHECK(x.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 9});
  Tensor y = iota({2, 3});
  y.select(0, 0).copy_(y.select(0, 1));  // same storage, disjoint: in place
  CHECK(y.to_vector<double>() == std::vector<double>{3, 4, 5, 3, 4, 5});
  Tensor z = iota({3, 3});
  z.copy_(z);  // the same elements in the same order
  CHECK(equal(z, iota({3, 3})));
}

TEST_CASE("copy_ writes through views, broadcasts and converts", "[runtime][views]") {
  Tensor a = Tensor::make_empty({3, 4}, kFloat32, Device::cpu());
  a.fill_(1.5);
  CHECK(a.to_vector<float>() == std::vector<float>(12, 1.5f));
  Tensor col = a.select(1, 2);
  col.copy_(from_vector<int64_t>({7, 8, 9}, {3}));
  CHECK(a.to_vector<float>()[2] == 7);
  CHECK(a.to_vector<float>()[10] == 9);
  a.narrow(0, 1, 1).copy_(from_vector<double>({-1}, {1}));  // broadcast source
  CHECK(a.to_vector<float>()[4] == -1);
  CHECK(a.to_vector<float>()[7] == -1);
  uint64_t v = a.storage()->version();
  a.t().zero_();
  CHECK(a.storage()->version() > v);
  CHECK(a.to_vector<float>() == std::vector<float>(12, 0.0f));
  CHECK(iota({1, 1}).item<double>() == 0);
  CHECK(from_vector<int32_t>({42}, {}).item<int64_t>() == 42);
}
