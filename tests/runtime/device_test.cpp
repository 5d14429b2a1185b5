#include <catch2/catch.hpp>

#include "tessera/tessera.h"

using namespace tessera;

TEST_CASE("devices print and compare; no CUDA device is not an error", "[runtime][device]") {
  CHECK(Device::cpu().str() == "cpu");
  CHECK(Device::cuda(1).str() == "cuda:1");
  CHECK(Device::cuda() != Device::cpu());
  // On a machine without a driver this must answer, not throw or crash.
  int n = 0;
  CHECK_NOTHROW(n = cuda_device_count());
  CHECK(cuda_is_available() == (n > 0));
  if (n == 0) {
    WARN("no CUDA device here: allocation on cuda:0 must raise a DeviceError");
    CHECK_THROWS_AS(Tensor::make_empty({2}, kFloat32, Device::cuda()), DeviceError);
  }
}
