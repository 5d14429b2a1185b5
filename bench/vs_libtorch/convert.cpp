// Moving values between the two libraries, for identical inputs and for checking results.

#include <algorithm>

#include "bench/vs_libtorch/cases.h"

namespace tessera::bench::vs_libtorch {

torch::Tensor to_torch(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  std::vector<int64_t> sizes(c.sizes().begin(), c.sizes().end());
  torch::ScalarType type = torch::kFloat32;
  if (c.dtype() == kBFloat16) {
    type = torch::kBFloat16;
  } else if (c.dtype() == kInt64) {
    type = torch::kInt64;
  } else {
    TS_CHECK(c.dtype() == kFloat32, "[vs_libtorch] to_torch: unsupported dtype ", c.dtype());
  }
  return torch::from_blob(c.raw_data(), sizes, torch::TensorOptions().dtype(type)).clone();
}

double relative_difference(const Tensor& a, const torch::Tensor& b) {
  const torch::Tensor ta = to_torch(a.to(kFloat32));
  const torch::Tensor tb = b.detach().to(torch::kFloat32);
  const double scale = std::max(tb.abs().max().item<double>(), 1e-30);
  return (ta - tb).abs().max().item<double>() / scale;
}

}  // namespace tessera::bench::vs_libtorch
