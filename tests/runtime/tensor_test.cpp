#include <catch2/catch.hpp>

#include "tessera/tessera.h"

using namespace tessera;

TEST_CASE("views share storage and follow torch.chunk sizes", "[runtime][views]") {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = a.t();
  CHECK(t.sizes() == Shape{3, 2});
  CHECK(t.strides() == Shape{1, 3});
  CHECK(!t.is_contiguous());
  CHECK(t.is_alias_of(a));
  CHECK(t.contiguous().to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
}
