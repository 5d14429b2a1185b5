// CUDA copy (host <-> device, device <-> device, across dtypes and strides), fill and arange
// against the CPU. Data movement is exact: every result must equal the CPU's bit for bit.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/runtime/cuda.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_compare.h"
#include "tests/cuda/cuda_test_util.h"

namespace ts = tessera;

namespace {

using cuda_test::kCuda;
using cuda_test::Layout;

// Source layouts, all of shape [6, 4] except zero-size and 0-dim.
std::vector<Layout> source_layouts() {
  return {
      {"contiguous", {6, 4}, [](const ts::Tensor& t) { return t; }},
      {"transposed", {4, 6}, [](const ts::Tensor& t) { return t.t(); }},
      {"sliced with step",
       {12, 12},
       [](const ts::Tensor& t) { return t.slice(0, 1, 12, 2).slice(1, 0, 12, 3); }},
      {"expand-broadcast",
       {1, 4},
       [](const ts::Tensor& t) {
         return t.expand({6, 4});
       }},
      {"zero-size", {0, 4}, [](const ts::Tensor& t) { return t; }},
      {"0-dim", {}, [](const ts::Tensor& t) { return t; }},
  };
}

const std::vector<ts::DType> kDTypes = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16,
                                        ts::kInt64,   ts::kInt32,   ts::kUInt8,    ts::kBool};

// Values every dtype holds after conversion: non-negative, small, some with fractions.
ts::Tensor random_values(const ts::Shape& shape, ts::DType dtype, uint64_t seed) {
  ts::Generator gen(seed);
  if (ts::is_floating_point(dtype)) return (ts::rand(shape, ts::kFloat64, &gen) * 6.0).to(dtype);
  if (dtype == ts::kBool) return ts::randint(0, 2, shape, ts::kBool, &gen);
  return ts::randint(0, 100, shape, dtype, &gen);
}

// An uninitialized destination of `shape` on `device`: contiguous, or transposed storage.
ts::Tensor destination(const ts::Shape& shape, ts::DType dtype, ts::Device device,
                       bool transposed) {
  if (!transposed || shape.size() != 2)
    return ts::empty(shape, ts::TensorOptions(dtype).device(device));
  return ts::empty({shape[1], shape[0]}, ts::TensorOptions(dtype).device(device)).t();
}

void check_equal(const ts::Tensor& expected, const ts::Tensor& got, const std::string& what) {
  INFO(what);
  const ts::Tensor host = got.cpu();
  REQUIRE(host.dtype() == expected.dtype());
  REQUIRE(host.sizes() == expected.sizes());
  CHECK(ts::equal(host, expected));
}

}  // namespace

TEST_CASE("cuda copy host to device converts dtypes into any strides", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType from : kDTypes) {
    for (ts::DType to : kDTypes) {
      for (const Layout& layout : source_layouts()) {
        const ts::Tensor src = layout.view(random_values(layout.base_shape, from, 1));
        const ts::Tensor expected = src.to(to);
        for (bool transposed : {false, true}) {
          ts::Tensor dst = destination(src.sizes(), to, kCuda, transposed);
          dst.copy_(src);
          check_equal(expected, dst,
                      std::string("H2D ") + std::string(ts::dtype_name(from)) + " -> " +
                          std::string(ts::dtype_name(to)) + " " + layout.name +
                          (transposed ? " into a transposed dst" : ""));
        }
      }
    }
  }
}

TEST_CASE("cuda copy device to host converts dtypes from any strides", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType from : kDTypes) {
    for (ts::DType to : kDTypes) {
      for (const Layout& layout : source_layouts()) {
        const ts::Tensor base = random_values(layout.base_shape, from, 2);
        const ts::Tensor expected = layout.view(base).to(to);
        const ts::Tensor src = layout.view(base.to(kCuda));
        for (bool transposed : {false, true}) {
          ts::Tensor dst = destination(src.sizes(), to, ts::Device::cpu(), transposed);
          dst.copy_(src);
          check_equal(expected, dst,
                      std::string("D2H ") + std::string(ts::dtype_name(from)) + " -> " +
                          std::string(ts::dtype_name(to)) + " " + layout.name +
                          (transposed ? " into a transposed dst" : ""));
        }
      }
    }
  }
}

TEST_CASE("cuda copy on one device converts dtypes between any strides", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType from : kDTypes) {
    for (ts::DType to : kDTypes) {
      for (const Layout& layout : source_layouts()) {
        const ts::Tensor base = random_values(layout.base_shape, from, 3);
        const ts::Tensor expected = layout.view(base).to(to);
        const ts::Tensor src = layout.view(base.to(kCuda));
        for (bool transposed : {false, true}) {
          ts::Tensor dst = destination(src.sizes(), to, kCuda, transposed);
          dst.copy_(src);
          check_equal(expected, dst,
                      std::string("D2D ") + std::string(ts::dtype_name(from)) + " -> " +
                          std::string(ts::dtype_name(to)) + " " + layout.name +
                          (transposed ? " into a transposed dst" : ""));
        }
      }
    }
  }
}

TEST_CASE("cuda clone, contiguous and to keep values and devices", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor base = random_values({33, 65}, ts::kFloat32, 4);
  const ts::Tensor dev = base.to(kCuda);
  CHECK(dev.device() == kCuda);
  check_equal(base, dev.clone(), "clone");
  check_equal(base.t().contiguous(), dev.t().contiguous(), "contiguous of a transpose");
  check_equal(base.to(ts::kBFloat16), dev.to(ts::kBFloat16), "to(bfloat16) on the device");
  check_equal(base.slice(1, 1, 65, 4), dev.slice(1, 1, 65, 4).cpu(), "D2H of a strided slice");
  // A large copy exercises the grid-stride loop.
  const ts::Tensor big = random_values({1 << 22}, ts::kFloat16, 5);
  check_equal(big.to(ts::kFloat32), big.to(kCuda).to(ts::kFloat32), "4M half -> float");
}

TEST_CASE("cuda copy between two devices", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  if (ts::cuda_device_count() < 2) {
    WARN("skipped: needs two CUDA devices, found " << ts::cuda_device_count());
    return;
  }
  const ts::Device other = ts::Device::cuda(1);
  // Tensor::copy_ refuses two different CUDA devices, so call the kernel itself.
  const ts::KernelTable& k = ts::kernels(ts::DeviceType::CUDA, "copy_");
  for (const Layout& layout : source_layouts()) {
    const ts::Tensor base = random_values(layout.base_shape, ts::kFloat32, 6);
    const ts::Tensor src = layout.view(base.to(kCuda));
    for (ts::DType to : {ts::kFloat32, ts::kBFloat16}) {
      for (bool transposed : {false, true}) {
        ts::Tensor dst = destination(src.sizes(), to, other, transposed);
        k.copy(dst, src);
        CHECK(dst.device() == other);
        check_equal(layout.view(base).to(to), dst,
                    "cuda:0 -> cuda:1 " + layout.name + (transposed ? " transposed" : ""));
      }
    }
  }
}

TEST_CASE("cuda fill writes every dtype into any strides", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : kDTypes) {
    for (const ts::Scalar& value : {ts::Scalar(2.75), ts::Scalar(int64_t{-3}), ts::Scalar(true)}) {
      const std::string what = std::string("fill ") + std::string(ts::dtype_name(dtype));
      const ts::TensorOptions opts = ts::TensorOptions(dtype);
      check_equal(ts::full({5, 3}, value, opts), ts::full({5, 3}, value, opts.device(kCuda)),
                  what + " full");
      ts::Tensor host = ts::zeros({6, 8}, opts);
      ts::Tensor dev = ts::zeros({6, 8}, ts::TensorOptions(dtype).device(kCuda));
      host.t().slice(0, 1, 8, 3).fill_(value);
      dev.t().slice(0, 1, 8, 3).fill_(value);
      check_equal(host, dev, what + " into a strided view");
      ts::Tensor empty_dev = ts::zeros({0, 4}, ts::TensorOptions(dtype).device(kCuda));
      empty_dev.fill_(value);
      check_equal(ts::zeros({}, opts).fill_(value),
                  ts::zeros({}, ts::TensorOptions(dtype).device(kCuda)).fill_(value),
                  what + " 0-dim");
    }
  }
}

TEST_CASE("cuda arange matches the CPU in every dtype", "[cuda][copy]") {
  TS_REQUIRE_CUDA_DEVICE();
  struct Range {
    ts::Scalar start, end, step;
  };
  const std::vector<Range> ranges = {
      {int64_t{0}, int64_t{1000}, int64_t{3}},
      {int64_t{50}, int64_t{-7}, int64_t{-2}},
      {-1.5, 7.25, 0.37},
      {0.0, 1.0, 0.001},
      {int64_t{0}, int64_t{0}, int64_t{1}},
  };
  for (ts::DType dtype :
       {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16, ts::kInt64, ts::kInt32}) {
    for (const Range& r : ranges) {
      if (!ts::is_floating_point(dtype) && r.step.is_floating_point()) continue;
      const ts::Tensor host = ts::arange(r.start, r.end, r.step, dtype);
      const ts::Tensor dev = ts::arange(r.start, r.end, r.step, dtype, kCuda);
      CHECK(dev.device() == kCuda);
      check_equal(host, dev, std::string("arange ") + std::string(ts::dtype_name(dtype)));
    }
  }
  const int64_t big = int64_t{1} << 53;
  check_equal(ts::arange(big, big + 10, 1, ts::kInt64),
              ts::arange(big, big + 10, 1, ts::kInt64, kCuda), "int64 arange beyond 2^53");
}
