// CUDA random fills against the CPU for the same generator state (Note [Philox counter layout]):
// uniform, randint and dropout bitwise, normal within a few ulps (device log/sin/cos round
// differently). Sizes cover partial last counters (n % 4 and n % 2 != 0), 0-dim and zero-size.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_compare.h"
#include "tests/cuda/cuda_test_util.h"

namespace ts = tessera;

namespace {

using cuda_test::kCuda;

const std::vector<ts::Shape> kShapes = {{}, {0}, {1}, {3}, {5}, {7, 9}, {4, 1001}, {1 << 20}};
const std::vector<ts::DType> kFloating = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16};

std::string describe(const char* op, ts::DType dtype, const ts::Shape& shape) {
  std::string s = std::string(op) + " " + std::string(ts::dtype_name(dtype)) + " [";
  for (int64_t d : shape) s += std::to_string(d) + ",";
  return s + "]";
}

void check_equal(const ts::Tensor& expected, const ts::Tensor& got) {
  REQUIRE(got.device() == kCuda);
  const ts::Tensor host = got.cpu();
  REQUIRE(host.dtype() == expected.dtype());
  REQUIRE(host.sizes() == expected.sizes());
  CHECK(ts::equal(host, expected));
}

}  // namespace

TEST_CASE("cuda rand draws the CPU's numbers bitwise", "[cuda][random]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : kFloating) {
    for (const ts::Shape& shape : kShapes) {
      INFO(describe("rand", dtype, shape));
      ts::Generator cpu_gen(1234), cuda_gen(1234);
      // Two draws in a row: the second starts where the first ended on both devices.
      for (int draw = 0; draw < 2; ++draw) {
        const ts::Tensor expected = ts::rand(shape, dtype, &cpu_gen);
        check_equal(expected, ts::rand(shape, ts::TensorOptions(dtype).device(kCuda), &cuda_gen));
      }
      CHECK(cpu_gen.offset() == cuda_gen.offset());
    }
  }
}

TEST_CASE("cuda rand and randn follow manual_seed on the default generator", "[cuda][random]") {
  TS_REQUIRE_CUDA_DEVICE();
  ts::manual_seed(7);
  const ts::Tensor a_cpu = ts::rand({257});
  const ts::Tensor b_cpu = ts::randn({257});
  ts::manual_seed(7);
  const ts::Tensor a_cuda = ts::rand({257}, ts::TensorOptions().device(kCuda));
  const ts::Tensor b_cuda = ts::randn({257}, ts::TensorOptions().device(kCuda));
  check_equal(a_cpu, a_cuda);
  CHECK(ts::allclose(b_cuda.cpu(), b_cpu, 1e-5, 1e-5));
}

TEST_CASE("cuda randn matches the CPU to a few ulps", "[cuda][random]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : kFloating) {
    for (const ts::Shape& shape : kShapes) {
      INFO(describe("randn", dtype, shape));
      ts::Generator cpu_gen(99), cuda_gen(99);
      const ts::Tensor expected = ts::randn(shape, dtype, &cpu_gen);
      const ts::Tensor got = ts::randn(shape, ts::TensorOptions(dtype).device(kCuda), &cuda_gen);
      REQUIRE(got.device() == kCuda);
      const ts::Tensor host = got.cpu();
      REQUIRE(host.dtype() == dtype);
      REQUIRE(host.sizes() == expected.sizes());
      // Values reach about 5.5 in magnitude; a reduced-precision result may land one ulp of its
      // dtype away when the float value sits next to a rounding boundary.
      const double tol = dtype == ts::kFloat64   ? 1e-13
                         : dtype == ts::kFloat32 ? 4e-6
                         : dtype == ts::kFloat16 ? 5e-3
                                                 : 4e-2;
      CHECK(ts::allclose(host, expected, tol, tol));
      CHECK(cpu_gen.offset() == cuda_gen.offset());
    }
  }
}

TEST_CASE("cuda randint draws the CPU's numbers bitwise in every dtype", "[cuda][random]") {
  TS_REQUIRE_CUDA_DEVICE();
  struct Range {
    int64_t low, high;
    ts::DType dtype;
  };
  const std::vector<Range> ranges = {
      {0, 10, ts::kInt64},
      {-1000, 1000, ts::kInt32},
      {0, 256, ts::kUInt8},
      {0, 2, ts::kBool},
      {-50, 50, ts::kFloat32},
      {0, 100, ts::kBFloat16},
      {-7, 8, ts::kFloat16},
      {0, 1 << 20, ts::kFloat64},
      {INT64_MIN / 2, INT64_MAX / 2, ts::kInt64},
      {INT64_MIN, INT64_MAX, ts::kInt64},
  };
  for (const Range& r : ranges) {
    for (const ts::Shape& shape : kShapes) {
      INFO(describe("randint", r.dtype, shape) << " [" << r.low << ", " << r.high << ")");
      ts::Generator cpu_gen(5), cuda_gen(5);
      const ts::Tensor expected = ts::randint(r.low, r.high, shape, r.dtype, &cpu_gen);
      check_equal(expected, ts::randint(r.low, r.high, shape,
                                        ts::TensorOptions(r.dtype).device(kCuda), &cuda_gen));
    }
  }
}

TEST_CASE("cuda dropout keeps the CPU's elements with the CPU's scale", "[cuda][random]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : kFloating) {
    for (double p : {0.1, 0.5, 0.9, 1.0}) {
      INFO(std::string(ts::dtype_name(dtype)) << " p = " << p);
      ts::Generator values(3);
      const ts::Tensor x = (ts::rand({37, 41}, ts::kFloat64, &values) * 4.0 - 2.0).to(dtype);
      const ts::Tensor xc = x.to(kCuda);
      // Contiguous, transposed, sliced with a step, expand-broadcast inputs.
      const std::vector<std::pair<ts::Tensor, ts::Tensor>> inputs = {
          {x, xc},
          {x.t(), xc.t()},
          {x.slice(0, 1, 37, 3).slice(1, 0, 41, 2), xc.slice(0, 1, 37, 3).slice(1, 0, 41, 2)},
          {x.select(0, 4).expand({6, 41}), xc.select(0, 4).expand({6, 41})},
          {x.narrow(0, 0, 0), xc.narrow(0, 0, 0)},
          {x.select(0, 2).select(0, 3), xc.select(0, 2).select(0, 3)},
      };
      for (const auto& [host_in, dev_in] : inputs) {
        ts::Generator cpu_gen(11), cuda_gen(11);
        const ts::Tensor expected = ts::dropout(host_in, p, true, &cpu_gen);
        check_equal(expected, ts::dropout(dev_in, p, true, &cuda_gen));
        CHECK(cpu_gen.offset() == cuda_gen.offset());
      }
    }
  }
}

TEST_CASE("cuda dropout of NaN and inf with p = 1 gives NaN as on the CPU", "[cuda][random]") {
  TS_REQUIRE_CUDA_DEVICE();
  const double inf = std::numeric_limits<double>::infinity();
  const ts::Tensor x = ts::from_vector<double>({1.0, inf, -inf, 2.0}, {4}).to(ts::kFloat32);
  const ts::Tensor got = ts::dropout(x.to(kCuda), 1.0).cpu();
  const ts::Tensor expected = ts::dropout(x, 1.0);
  CHECK(ts::allclose(got, expected, 0.0, 0.0, true));
}
