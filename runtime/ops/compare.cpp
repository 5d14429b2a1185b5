// Whole-tensor checks: allclose and equal. They answer one bool, so they run on the CPU.

#include <cmath>
#include <cstring>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"

namespace tessera {

namespace {

// Broadcasts t to shape and returns it contiguous on the CPU in dtype.
Tensor host_values(const Tensor& t, const Shape& shape, DType dtype) {
  Tensor e = t.sizes() == shape ? t : t.expand(shape);
  return e.to(dtype).cpu().contiguous();
}

bool all_close(const double* x, const double* y, int64_t n, double rtol, double atol,
               bool equal_nan) {
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == y[i]) continue;  // also equal infinities
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (equal_nan && std::isnan(x[i]) && std::isnan(y[i])) continue;
      return false;
    }
    const double err = std::fabs(x[i] - y[i]);
    if (!std::isfinite(err) || err > atol + rtol * std::fabs(y[i])) return false;
  }
  return true;
}

// The difference is taken exactly (in uint64) before it is compared in double.
bool all_close(const int64_t* x, const int64_t* y, int64_t n, double rtol, double atol) {
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] == y[i]) continue;
    const auto ux = static_cast<uint64_t>(x[i]), uy = static_cast<uint64_t>(y[i]);
    const uint64_t diff = x[i] > y[i] ? ux - uy : uy - ux;
    const double bound = atol + rtol * std::fabs(static_cast<double>(y[i]));
    if (static_cast<double>(diff) > bound) return false;
  }
  return true;
}

}  // namespace

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  TS_CHECK(a.defined() && b.defined(), "[allclose] undefined tensor argument");
  // DTensors compare as their whole tensors (a collective on their mesh).
  if (a.is_distributed() || b.is_distributed()) {
    return allclose(a.full_tensor(), b.full_tensor(), rtol, atol, equal_nan);
  }
  TS_CHECK_DTYPE(a.dtype() == b.dtype(), "[allclose] dtypes must match, got ", a.dtype(), " and ",
                 b.dtype(), "; convert one of them with .to(dtype)");
  TS_CHECK(rtol >= 0 && atol >= 0, "[allclose] rtol and atol must be >= 0, got rtol ", rtol,
           " and atol ", atol);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "allclose");
  // Integers compare exactly in int64 (float64 would round beyond 2^53).
  const DType dtype = is_floating_point(a.dtype()) ? kFloat64 : kInt64;
  const Tensor x = host_values(a, shape, dtype);
  const Tensor y = host_values(b, shape, dtype);
  if (dtype == kFloat64) {
    return all_close(x.data_ptr<double>(), y.data_ptr<double>(), x.numel(), rtol, atol, equal_nan);
  }
  return all_close(x.data_ptr<int64_t>(), y.data_ptr<int64_t>(), x.numel(), rtol, atol);
}

bool equal(const Tensor& a, const Tensor& b) {
  TS_CHECK(a.defined() && b.defined(), "[equal] undefined tensor argument");
  if (a.is_distributed() || b.is_distributed()) return equal(a.full_tensor(), b.full_tensor());
  TS_CHECK_T(DeviceError, a.device() == b.device(),
             "[equal] expected both tensors on the same device, got ", a.device(), " and ",
             b.device());
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const Tensor same = eq(a, b).cpu();
  // eq's output is a fresh contiguous bool tensor: any zero byte is a mismatch.
  return std::memchr(same.raw_data(), 0, static_cast<size_t>(same.numel())) == nullptr;
}

}  // namespace tessera
