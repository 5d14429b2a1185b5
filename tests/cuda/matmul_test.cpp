// CUDA matmul (cuBLASLt for floating dtypes, a tiled kernel for integers) against the CPU twin:
// every dtype, transposed / sliced / broadcast operands, batches, zero-size and odd shapes, and
// TF32 on and off.

#include <cmath>
#include <string>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_test_util.h"

namespace {

using tessera::DType;
using tessera::Shape;
using tessera::Tensor;
namespace ts = tessera;

const ts::Device kGpu = ts::Device::cuda();

Tensor input(const Shape& shape, DType dtype) {
  if (ts::is_floating_point(dtype)) return ts::randn(shape).to(dtype);
  // Small values: int32 / int64 products stay exact; uint8 wraps, as it does on the CPU.
  return ts::randint(dtype == ts::kUInt8 ? 0 : -20, 20, shape, dtype);
}

// Tolerances relative to the accumulation length k: the GPU and the CPU sum k products in
// different orders, and both round the result to the output dtype once.
struct Tolerance {
  double rtol;
  double atol;
};

Tolerance tolerance(DType dtype, int64_t k, bool tf32) {
  const double scale = std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  switch (dtype) {
    case ts::kFloat32:
      return tf32 ? Tolerance{5e-3, 5e-3 * scale} : Tolerance{1e-4, 1e-5 * scale};
    case ts::kBFloat16:
      return {2e-2, 2e-2 * scale};
    case ts::kFloat16:
      return {4e-3, 4e-3 * scale};
    default:
      return {1e-10, 1e-12 * scale};
  }
}

// got (CUDA) against want (CPU): exact for integers, else within tolerance(dtype, k).
void expect_matches(const Tensor& got, const Tensor& want, int64_t k, const std::string& what,
                    bool tf32 = false) {
  INFO(what << " dtype " << want.dtype() << " shape " << want.sizes());
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.sizes() == want.sizes());
  const Tensor host = got.cpu();
  if (!ts::is_floating_point(want.dtype())) {
    CHECK(ts::equal(host, want));
    return;
  }
  const Tolerance tol = tolerance(want.dtype(), k, tf32);
  CHECK(ts::allclose(host.to(ts::kFloat64), want.to(ts::kFloat64), tol.rtol, tol.atol));
}

// matmul(a, b) on the GPU (operands moved there and reshaped alike by `view`) against the CPU.
template <typename View>
void check_matmul(const Tensor& a, const Tensor& b, View view, const std::string& what) {
  const Tensor want = ts::matmul(view(a), view(b));
  const Tensor got = ts::matmul(view(a.to(kGpu)), view(b.to(kGpu)));
  expect_matches(got, want, view(a).size(-1), what);
}

const DType kDtypes[] = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16,
                         ts::kInt32,   ts::kInt64,   ts::kUInt8};

}  // namespace

TEST_CASE("cuda matmul: 2-D and batched products of every dtype", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  const auto same = [](const Tensor& t) { return t; };
  for (DType dtype : kDtypes) {
    check_matmul(input({7, 5}, dtype), input({5, 9}, dtype), same, "2-D");
    check_matmul(input({3, 7, 5}, dtype), input({3, 5, 9}, dtype), same, "batched");
    check_matmul(input({2, 3, 4, 6}, dtype), input({2, 3, 6, 5}, dtype), same, "2 batch dims");
  }
}

TEST_CASE("cuda matmul: matrix-vector and vector-vector match the CPU", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (DType dtype : kDtypes) {
    const Tensor m = input({7, 5}, dtype), v = input({5}, dtype), w = input({7}, dtype);
    expect_matches(ts::matmul(m.to(kGpu), v.to(kGpu)), ts::matmul(m, v), 5, "matrix-vector");
    expect_matches(ts::matmul(w.to(kGpu), m.to(kGpu)), ts::matmul(w, m), 7, "vector-matrix");
    expect_matches(ts::matmul(v.to(kGpu), v.to(kGpu)), ts::matmul(v, v), 5, "dot");
  }
}

TEST_CASE("cuda mm, bmm and linear match the CPU", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    const Tensor a = input({6, 4}, dtype), b = input({4, 3}, dtype);
    expect_matches(ts::mm(a.to(kGpu), b.to(kGpu)), ts::mm(a, b), 4, "mm");
    const Tensor x = input({5, 6, 4}, dtype), y = input({5, 4, 3}, dtype);
    expect_matches(ts::bmm(x.to(kGpu), y.to(kGpu)), ts::bmm(x, y), 4, "bmm");
    const Tensor in = input({2, 5, 8}, dtype), weight = input({3, 8}, dtype);
    const Tensor bias = input({3}, dtype);
    expect_matches(ts::linear(in.to(kGpu), weight.to(kGpu), bias.to(kGpu)),
                   ts::linear(in, weight, bias), 8, "linear with bias");
    expect_matches(ts::linear(in.to(kGpu), weight.to(kGpu)), ts::linear(in, weight), 8,
                   "linear without bias");
  }
}

TEST_CASE("cuda matmul: transposed and sliced operands are read in place", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (DType dtype : kDtypes) {
    // a^T, b^T: column-major operands.
    check_matmul(
        input({5, 7}, dtype), input({9, 5}, dtype), [](const Tensor& t) { return t.t(); },
        "both transposed");
    const Tensor a = input({7, 5}, dtype), bt = input({9, 5}, dtype);
    expect_matches(ts::matmul(a.to(kGpu), bt.to(kGpu).t()), ts::matmul(a, bt.t()), 5,
                   "b transposed");
    // Column slices: a leading dim larger than the row.
    const Tensor wide_a = input({7, 12}, dtype), wide_b = input({5, 13}, dtype);
    expect_matches(ts::matmul(wide_a.to(kGpu).narrow(1, 3, 5), wide_b.to(kGpu).narrow(1, 1, 9)),
                   ts::matmul(wide_a.narrow(1, 3, 5), wide_b.narrow(1, 1, 9)), 5,
                   "column slices (offset, misaligned pointers)");
    // Strided rows and columns (step 2): no BLAS layout, copied first.
    const Tensor big = input({14, 10}, dtype), other = input({5, 9}, dtype);
    expect_matches(ts::matmul(big.to(kGpu).slice(0, 0, 14, 2).slice(1, 0, 10, 2), other.to(kGpu)),
                   ts::matmul(big.slice(0, 0, 14, 2).slice(1, 0, 10, 2), other), 5,
                   "step-2 slices");
    // Batched, transposed inside each batch, and a permuted batch dim.
    const Tensor x = input({3, 5, 7}, dtype), y = input({9, 3, 5}, dtype);
    expect_matches(ts::matmul(x.to(kGpu).transpose(1, 2), y.to(kGpu).permute({1, 2, 0})),
                   ts::matmul(x.transpose(1, 2), y.permute({1, 2, 0})), 5,
                   "batched transposed / permuted");
  }
}

TEST_CASE("cuda matmul: broadcast batch dims", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (DType dtype : kDtypes) {
    // b broadcast over a's batch (stride 0 through matmul's broadcasting).
    const Tensor a = input({4, 6, 5}, dtype), b = input({5, 3}, dtype);
    expect_matches(ts::matmul(a.to(kGpu), b.to(kGpu)), ts::matmul(a, b), 5, "b broadcast");
    // Both broadcast along different dims: [2, 1, M, K] x [1, 3, K, N].
    const Tensor c = input({2, 1, 6, 5}, dtype), d = input({1, 3, 5, 4}, dtype);
    expect_matches(ts::matmul(c.to(kGpu), d.to(kGpu)), ts::matmul(c, d), 5, "both broadcast");
    // An explicitly expanded operand.
    const Tensor e = input({1, 6, 5}, dtype), f = input({4, 5, 3}, dtype);
    expect_matches(ts::matmul(e.to(kGpu).expand({4, 6, 5}), f.to(kGpu)),
                   ts::matmul(e.expand({4, 6, 5}), f), 5, "expand");
  }
}

TEST_CASE("cuda matmul: zero-size and 1x1 shapes", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (DType dtype : kDtypes) {
    // K == 0: every element is an empty sum, 0 (the output memory starts uninitialized).
    const Tensor a = input({4, 0}, dtype), b = input({0, 3}, dtype);
    const Tensor k0 = ts::matmul(a.to(kGpu), b.to(kGpu));
    CHECK(k0.sizes() == Shape{4, 3});
    CHECK(ts::equal(k0.cpu(), ts::zeros({4, 3}, dtype)));
    const Tensor bk0 =
        ts::matmul(input({2, 4, 0}, dtype).to(kGpu), input({2, 0, 3}, dtype).to(kGpu));
    CHECK(ts::equal(bk0.cpu(), ts::zeros({2, 4, 3}, dtype)));
    // M == 0, N == 0, batch == 0: empty results.
    CHECK(ts::matmul(input({0, 5}, dtype).to(kGpu), input({5, 3}, dtype).to(kGpu)).sizes() ==
          Shape{0, 3});
    CHECK(ts::matmul(input({4, 5}, dtype).to(kGpu), input({5, 0}, dtype).to(kGpu)).sizes() ==
          Shape{4, 0});
    CHECK(ts::matmul(input({0, 4, 5}, dtype).to(kGpu), input({0, 5, 3}, dtype).to(kGpu)).sizes() ==
          Shape{0, 4, 3});
    // 1 x 1 x 1 (cuBLASLt's smallest problem, leading dims of 1).
    check_matmul(
        input({1, 1}, dtype), input({1, 1}, dtype), [](const Tensor& t) { return t; }, "1x1");
  }
}

TEST_CASE("cuda matmul: large odd shape 513x257x1031", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (DType dtype : kDtypes) {
    const Tensor a = input({513, 1031}, dtype), b = input({1031, 257}, dtype);
    expect_matches(ts::matmul(a.to(kGpu), b.to(kGpu)), ts::matmul(a, b), 1031, "513x257x1031");
  }
  // Repeated GEMMs of one geometry reuse the cached plan; results stay identical.
  const Tensor a = input({513, 1031}, ts::kFloat32).to(kGpu);
  const Tensor b = input({1031, 257}, ts::kFloat32).to(kGpu);
  CHECK(ts::equal(ts::matmul(a, b).cpu(), ts::matmul(a, b).cpu()));
}

TEST_CASE("cuda matmul: TF32 only when allowed", "[cuda]") {
  TS_REQUIRE_CUDA_DEVICE();
  struct RestoreTf32 {
    bool saved = ts::cuda::matmul_allow_tf32();
    ~RestoreTf32() { ts::cuda::set_matmul_allow_tf32(saved); }
  } restore;
  const Tensor a = input({128, 512}, ts::kFloat32), b = input({512, 64}, ts::kFloat32);
  const Tensor want = ts::matmul(a.to(ts::kFloat64), b.to(ts::kFloat64));

  ts::cuda::set_matmul_allow_tf32(false);
  const Tensor full = ts::matmul(a.to(kGpu), b.to(kGpu));
  // Full float32: far closer to the float64 product than TF32's 10-bit mantissa allows.
  CHECK(ts::allclose(full.cpu().to(ts::kFloat64), want, 1e-5, 5e-4));

  ts::cuda::set_matmul_allow_tf32(true);
  const Tensor tf32 = ts::matmul(a.to(kGpu), b.to(kGpu));
  expect_matches(tf32, ts::matmul(a, b), 512, "tf32", /*tf32=*/true);
}
