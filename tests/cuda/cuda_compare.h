#pragma once
// What the CUDA kernel tests share: the device, views taken alike of a base tensor on the CPU and
// on CUDA, and the comparison of a CUDA result with its CPU twin's (each test file sets its own
// floating tolerances).

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"

namespace cuda_test {

inline const tessera::Device kCuda = tessera::Device::cuda();

// A view of a base tensor: the same view is taken on the CPU and the CUDA copy of the base.
struct Layout {
  std::string name;
  tessera::Shape base_shape;
  std::function<tessera::Tensor(const tessera::Tensor&)> view;
};

inline std::string dtype_str(tessera::DType dtype) {
  return std::string(tessera::dtype_name(dtype));
}

struct Tolerance {
  double rtol;
  double atol;
};
struct Tolerances {
  Tolerance f32, f64, bf16, f16;
};

// got_cuda is on CUDA with expected's dtype and shape; floating values within `tol` (NaN equal to
// NaN), everything else exactly.
inline void check_close(const tessera::Tensor& expected, const tessera::Tensor& got_cuda,
                        const std::string& what, const Tolerances& tol) {
  INFO(what);
  REQUIRE(got_cuda.device() == kCuda);
  const tessera::Tensor got = got_cuda.cpu();
  REQUIRE(got.dtype() == expected.dtype());
  REQUIRE(got.sizes() == expected.sizes());
  const auto close = [&](const Tolerance& t) {
    return tessera::allclose(got, expected, t.rtol, t.atol, true);
  };
  switch (expected.dtype()) {
    case tessera::kFloat32:
      CHECK(close(tol.f32));
      break;
    case tessera::kFloat64:
      CHECK(close(tol.f64));
      break;
    case tessera::kBFloat16:
      CHECK(close(tol.bf16));
      break;
    case tessera::kFloat16:
      CHECK(close(tol.f16));
      break;
    default:
      CHECK(tessera::equal(got, expected));
  }
}

}  // namespace cuda_test
