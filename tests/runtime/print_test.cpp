#include <catch2/catch.hpp>
#include <sstream>

#include "tessera/tessera.h"

using namespace tessera;

namespace {
std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}
}  // namespace

TEST_CASE("tensors print like PyTorch", "[runtime][print]") {
  CHECK(str(from_vector<float>({1, 2, 3, 4}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(str(from_vector<float>({0.5f, -1.25f}, {2})) == "tensor([0.5000, -1.2500])");
  CHECK(str(from_vector<int64_t>({3, -4}, {2})) == "tensor([3, -4])");
  CHECK(str(from_vector<double>({2}, {})) == "tensor(2., dtype=float64)");
  CHECK(str(from_vector<bool>({true, false}, {2})) == "tensor([True, False])");
  CHECK(str(from_vector<int32_t>({}, {0})) == "tensor([], dtype=int32)");
  CHECK(str(Tensor()) == "tensor(undefined)");
  std::vector<float> many(2000, 1.0f);
  std::string s = str(from_vector<float>(many, {2000}));
  CHECK(s == "tensor([1., 1., 1., ..., 1., 1., 1.])");
  CHECK(fmt::format("{}", from_vector<int64_t>({1}, {1})) == "tensor([1])");
  CHECK(fmt::format("{} {} {}", Shape{2, 3}, kFloat16, Device::cpu()) == "[2, 3] float16 cpu");
}
