#pragma once
// The float64 reference of matmul shared by the runtime tests (linalg_test, gemm_backends_test).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"

namespace tessera::runtime_test {

// The product in float64, with sum over k of |a * b| per element: the scale of float32 rounding.
struct Expected {
  Shape shape;
  std::vector<double> value;
  std::vector<double> magnitude;  // sum over k of |a * b|: the scale of rounding errors
};

// torch.matmul written out: 1-D operands promoted to a row / a column, batch dims broadcast.
inline Expected reference_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> va = a.contiguous().to_vector<double>();
  const std::vector<double> vb = b.contiguous().to_vector<double>();
  Shape sa = a.sizes(), sb = b.sizes();
  if (a.dim() == 1) sa.insert(sa.begin(), 1);
  if (b.dim() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nd = std::max(ba.size(), bb.size());
  Shape batch(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t x = i < nd - ba.size() ? 1 : ba[i - (nd - ba.size())];
    const int64_t y = i < nd - bb.size() ? 1 : bb[i - (nd - bb.size())];
    batch[i] = std::max(x, y);
  }
  // Linear batch index of an operand with batch sizes `own` at the broadcast index `idx`.
  auto operand_batch = [&](const Shape& own, const std::vector<int64_t>& idx) {
    int64_t lin = 0;
    for (size_t i = 0; i < own.size(); ++i) {
      const int64_t j = idx[i + (nd - own.size())];
      lin = lin * own[i] + (own[i] == 1 ? 0 : j);
    }
    return lin;
  };
  Expected e;
  const int64_t nbatch = batch.numel();
  std::vector<int64_t> idx(nd, 0);
  for (int64_t t = 0; t < nbatch; ++t) {
    int64_t rem = t;
    for (size_t i = nd; i-- > 0;) {
      idx[i] = rem % batch[i];
      rem /= batch[i];
    }
    const int64_t ia = operand_batch(ba, idx), ib = operand_batch(bb, idx);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = va[static_cast<size_t>((ia * m + i) * k + p)];
          const double y = vb[static_cast<size_t>((ib * k + p) * n + j)];
          sum += x * y;
          mag += std::abs(x * y);
        }
        e.value.push_back(sum);
        e.magnitude.push_back(mag);
      }
    }
  }
  e.shape = batch;
  if (a.dim() > 1) e.shape.push_back(m);
  if (b.dim() > 1) e.shape.push_back(n);
  return e;
}

}  // namespace tessera::runtime_test
