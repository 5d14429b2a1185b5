// CUDA elementwise kernels (unary, binary, where, clamp, fused pointwise backward) against their
// CPU twins, on every layout the kernels distinguish: contiguous (vectorized), unaligned
// contiguous, transposed, sliced with a step, expand-broadcast, zero-size and 0-dim.

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_compare.h"
#include "tests/cuda/cuda_test_util.h"

namespace ts = tessera;

namespace {

using cuda_test::kCuda;
using cuda_test::Layout;

// Views of shape [5, 7], except the long one ([3, 1037]: vector body plus a tail), zero-size
// [0, 7] and 0-dim [].
std::vector<Layout> layouts() {
  return {
      {"contiguous", {5, 7}, [](const ts::Tensor& t) { return t; }},
      {"long contiguous", {3, 1037}, [](const ts::Tensor& t) { return t; }},
      {"unaligned contiguous",
       {36},
       [](const ts::Tensor& t) {
         return t.narrow(0, 1, 35).view({5, 7});
       }},
      {"transposed", {7, 5}, [](const ts::Tensor& t) { return t.t(); }},
      {"sliced with step",
       {10, 15},
       [](const ts::Tensor& t) { return t.slice(0, 0, 10, 2).slice(1, 1, 15, 2); }},
      {"expand-broadcast",
       {1, 7},
       [](const ts::Tensor& t) {
         return t.expand({5, 7});
       }},
      {"zero-size", {0, 7}, [](const ts::Tensor& t) { return t; }},
      {"0-dim", {}, [](const ts::Tensor& t) { return t; }},
  };
}

const std::vector<ts::DType> kDTypes = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16,
                                        ts::kInt64,   ts::kInt32,   ts::kUInt8,    ts::kBool};

// Reproducible values: floats in [-2, 2), integers in [-9, 10) ([0, 10) for uint8), bools.
ts::Tensor random_values(const ts::Shape& shape, ts::DType dtype, uint64_t seed) {
  ts::Generator gen(seed);
  if (ts::is_floating_point(dtype)) {
    return (ts::rand(shape, ts::kFloat64, &gen) * 4.0 - 2.0).to(dtype);
  }
  if (dtype == ts::kBool) return ts::randint(0, 2, shape, ts::kBool, &gen);
  return ts::randint(dtype == ts::kUInt8 ? 0 : -9, 10, shape, dtype, &gen);
}

struct Pair {
  ts::Tensor cpu;
  ts::Tensor cuda;
};

Pair make_input(const Layout& layout, ts::DType dtype, uint64_t seed) {
  const ts::Tensor base = random_values(layout.base_shape, dtype, seed);
  return {layout.view(base), layout.view(base.to(kCuda))};
}

// Exact for integers and bools; floating results to a few ulps of their dtype (the device's
// exp/log/tanh/erf round differently from the host's), NaN equal to NaN.
void check_close(const ts::Tensor& expected, const ts::Tensor& got_cuda, const std::string& what) {
  cuda_test::check_close(expected, got_cuda, what,
                         {{1e-5, 1e-6}, {1e-12, 1e-14}, {1e-2, 1e-3}, {2e-3, 1e-4}});
}

// Runs op on both devices; where the CPU refuses the input, CUDA must refuse it too.
template <typename Op>
void compare_op(const std::string& what, const Op& op, const std::vector<Pair>& inputs) {
  std::vector<ts::Tensor> cpu_args, cuda_args;
  for (const Pair& p : inputs) {
    cpu_args.push_back(p.cpu);
    cuda_args.push_back(p.cuda);
  }
  ts::Tensor expected;
  try {
    expected = op(cpu_args);
  } catch (const ts::Error&) {
    INFO(what << ": refused on CPU, so on CUDA too");
    CHECK_THROWS_AS(op(cuda_args), ts::Error);
    return;
  }
  check_close(expected, op(cuda_args), what);
}

using Args = std::vector<ts::Tensor>;

const std::vector<std::pair<std::string, std::function<ts::Tensor(const Args&)>>> kUnaryOps = {
    {"neg", [](const Args& a) { return ts::neg(a[0]); }},
    {"abs", [](const Args& a) { return ts::abs(a[0]); }},
    {"exp", [](const Args& a) { return ts::exp(a[0]); }},
    {"log", [](const Args& a) { return ts::log(a[0]); }},
    {"sqrt", [](const Args& a) { return ts::sqrt(a[0]); }},
    {"rsqrt", [](const Args& a) { return ts::rsqrt(a[0]); }},
    {"relu", [](const Args& a) { return ts::relu(a[0]); }},
    {"gelu", [](const Args& a) { return ts::gelu(a[0]); }},
    {"gelu tanh", [](const Args& a) { return ts::gelu(a[0], "tanh"); }},
    {"silu", [](const Args& a) { return ts::silu(a[0]); }},
    {"tanh", [](const Args& a) { return ts::tanh(a[0]); }},
    {"sigmoid", [](const Args& a) { return ts::sigmoid(a[0]); }},
    {"erf", [](const Args& a) { return ts::erf(a[0]); }},
    {"erfc", [](const Args& a) { return ts::erfc(a[0]); }},
    {"logical_not", [](const Args& a) { return ts::logical_not(a[0]); }},
};

const std::vector<std::pair<std::string, std::function<ts::Tensor(const Args&)>>> kBinaryOps = {
    {"add", [](const Args& a) { return ts::add(a[0], a[1]); }},
    {"sub", [](const Args& a) { return ts::sub(a[0], a[1]); }},
    {"mul", [](const Args& a) { return ts::mul(a[0], a[1]); }},
    {"div", [](const Args& a) { return ts::div(a[0], a[1]); }},
    {"pow", [](const Args& a) { return ts::pow(a[0], a[1]); }},
    {"maximum", [](const Args& a) { return ts::maximum(a[0], a[1]); }},
    {"minimum", [](const Args& a) { return ts::minimum(a[0], a[1]); }},
    {"eq", [](const Args& a) { return ts::eq(a[0], a[1]); }},
    {"ne", [](const Args& a) { return ts::ne(a[0], a[1]); }},
    {"lt", [](const Args& a) { return ts::lt(a[0], a[1]); }},
    {"le", [](const Args& a) { return ts::le(a[0], a[1]); }},
    {"gt", [](const Args& a) { return ts::gt(a[0], a[1]); }},
    {"ge", [](const Args& a) { return ts::ge(a[0], a[1]); }},
    {"logical_and", [](const Args& a) { return ts::logical_and(a[0], a[1]); }},
    {"logical_or", [](const Args& a) { return ts::logical_or(a[0], a[1]); }},
};

}  // namespace

TEST_CASE("cuda unary ops match the CPU on every layout and dtype", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (const auto& [name, op] : kUnaryOps) {
    for (ts::DType dtype : kDTypes) {
      for (const Layout& layout : layouts()) {
        const std::string what =
            name + " " + std::string(ts::dtype_name(dtype)) + " " + layout.name;
        compare_op(what, op, {make_input(layout, dtype, 11)});
      }
    }
  }
}

TEST_CASE("cuda binary ops match the CPU on every layout and dtype", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (const auto& [name, op] : kBinaryOps) {
    for (ts::DType dtype : kDTypes) {
      for (const Layout& layout : layouts()) {
        const std::string what =
            name + " " + std::string(ts::dtype_name(dtype)) + " " + layout.name;
        // The second operand: a contiguous tensor of the first's shape, then the same layout
        // with other values (both operands strided or broadcast).
        const Layout plain{"contiguous", layout.view(ts::empty(layout.base_shape)).sizes(),
                           [](const ts::Tensor& t) { return t; }};
        compare_op(what + " with contiguous b", op,
                   {make_input(layout, dtype, 21), make_input(plain, dtype, 22)});
        compare_op(what + " with b of the same layout", op,
                   {make_input(layout, dtype, 23), make_input(layout, dtype, 24)});
      }
    }
  }
}

TEST_CASE("cuda binary ops broadcast rows, columns and scalars", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : {ts::kFloat32, ts::kBFloat16, ts::kInt64, ts::kBool}) {
    const Pair a = make_input({"a", {4, 1, 6}, [](const ts::Tensor& t) { return t; }}, dtype, 31);
    const Pair row = make_input({"row", {6}, [](const ts::Tensor& t) { return t; }}, dtype, 32);
    const Pair col = make_input({"col", {5, 1}, [](const ts::Tensor& t) { return t; }}, dtype, 33);
    const Pair scalar =
        make_input({"scalar", {}, [](const ts::Tensor& t) { return t; }}, dtype, 34);
    for (const auto& [name, op] : kBinaryOps) {
      const std::string what = name + " " + std::string(ts::dtype_name(dtype));
      compare_op(what + " [4,1,6] x [6]", op, {a, row});
      compare_op(what + " [4,1,6] x [5,1]", op, {a, col});
      compare_op(what + " [5,1] x [4,1,6]", op, {col, a});
      compare_op(what + " [4,1,6] x []", op, {a, scalar});
      compare_op(what + " [] x [4,1,6]", op, {scalar, a});
    }
  }
}

TEST_CASE("cuda comparisons write bool and integer ops wrap as on the CPU", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor a = ts::from_vector<int64_t>({INT64_MAX, INT64_MIN, 3, -3, 2, -1}, {6});
  const ts::Tensor b = ts::from_vector<int64_t>({1, -1, 40, 3, 63, -7}, {6});
  const ts::Tensor ac = a.to(kCuda), bc = b.to(kCuda);
  check_close(ts::add(a, b), ts::add(ac, bc), "add wraps");
  check_close(ts::mul(a, b), ts::mul(ac, bc), "mul wraps");
  check_close(ts::sub(a, b), ts::sub(ac, bc), "sub wraps");
  check_close(ts::pow(a, b), ts::pow(ac, bc), "pow by squaring, negative exponents");
  check_close(ts::neg(a), ts::neg(ac), "neg wraps");
  check_close(ts::abs(a), ts::abs(ac), "abs wraps");
  const ts::Tensor lt = ts::lt(ac, bc);
  CHECK(lt.dtype() == ts::kBool);
  check_close(ts::lt(a, b), lt, "lt");
}

TEST_CASE("cuda maximum, minimum and clamp propagate NaN", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (ts::DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
    const ts::Tensor a = ts::from_vector<double>({nan, 1.0, -2.0, nan, 5.0}, {5}).to(dtype);
    const ts::Tensor b = ts::from_vector<double>({0.0, nan, 3.0, nan, -5.0}, {5}).to(dtype);
    const ts::Tensor ac = a.to(kCuda), bc = b.to(kCuda);
    check_close(ts::maximum(a, b), ts::maximum(ac, bc), "maximum");
    check_close(ts::minimum(a, b), ts::minimum(ac, bc), "minimum");
    check_close(ts::clamp(a, -1.0, 2.0), ts::clamp(ac, -1.0, 2.0), "clamp");
    check_close(ts::clamp(a, nan, 2.0), ts::clamp(ac, nan, 2.0), "clamp with a NaN bound");
  }
}

TEST_CASE("cuda where matches the CPU on every layout and dtype", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : kDTypes) {
    for (const Layout& layout : layouts()) {
      const std::string what =
          std::string("where ") + std::string(ts::dtype_name(dtype)) + " " + layout.name;
      compare_op(what, [](const Args& a) { return ts::where(a[0], a[1], a[2]); },
                 {make_input(layout, ts::kBool, 41), make_input(layout, dtype, 42),
                  make_input(layout, dtype, 43)});
    }
    // cond broadcast against full operands.
    const Layout full{"full", {5, 7}, [](const ts::Tensor& t) { return t; }};
    const Layout row{"row", {7}, [](const ts::Tensor& t) { return t; }};
    compare_op(
        std::string("where broadcast cond ") + std::string(ts::dtype_name(dtype)),
        [](const Args& a) { return ts::where(a[0], a[1], a[2]); },
        {make_input(row, ts::kBool, 44), make_input(full, dtype, 45), make_input(row, dtype, 46)});
  }
}

TEST_CASE("cuda clamp matches the CPU on every layout and dtype", "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  for (ts::DType dtype : kDTypes) {
    for (const Layout& layout : layouts()) {
      const std::string what =
          std::string("clamp ") + std::string(ts::dtype_name(dtype)) + " " + layout.name;
      compare_op(what + " [lo, hi]", [](const Args& a) { return ts::clamp(a[0], -1, 1); },
                 {make_input(layout, dtype, 51)});
      compare_op(what + " lo only",
                 [](const Args& a) { return ts::clamp(a[0], 0.5, std::nullopt); },
                 {make_input(layout, dtype, 52)});
      compare_op(what + " hi only", [](const Args& a) { return ts::clamp(a[0], std::nullopt, 3); },
                 {make_input(layout, dtype, 53)});
    }
  }
}

TEST_CASE("cuda fused pointwise backward kernels match the CPU on every layout",
          "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  // Operands in [-2, 2): the domain ops (log, sqrt, pow) give NaN on both devices alike.
  struct GradOp {
    ts::PointwiseGradOp op;
    int operands;
  };
  const std::vector<GradOp> ops = {
#define TS_GRAD_OP(e, label, operands) {ts::PointwiseGradOp::e, operands},
      TS_FOR_EACH_POINTWISE_GRAD_OP(TS_GRAD_OP)
#undef TS_GRAD_OP
  };
  for (const GradOp& g : ops) {
    for (ts::DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16}) {
      for (const Layout& layout : layouts()) {
        const std::string what = std::string(ts::op_name(g.op)) + " " +
                                 std::string(ts::dtype_name(dtype)) + " " + layout.name;
        // Sized up front: growing a vector made from a two-element list trips GCC 12's
        // -Warray-bounds at -O3 (a false positive on the reallocation path).
        std::vector<Pair> in(static_cast<size_t>(g.operands) + 1);
        for (size_t k = 0; k < in.size(); ++k) in[k] = make_input(layout, dtype, 71 + k);
        compare_op(
            what,
            [op = g.op](const Args& a) {
              return ts::pointwise_backward(op, a[0], a[1], a.size() > 2 ? a[2] : ts::Tensor(),
                                            -0.5, 0.75);
            },
            in);
      }
    }
  }
}

TEST_CASE("cuda elementwise results stay on the input's device and in-place ops work",
          "[cuda][elementwise]") {
  TS_REQUIRE_CUDA_DEVICE();
  ts::Tensor a = random_values({64, 33}, ts::kFloat32, 61);
  const ts::Tensor b = random_values({33}, ts::kFloat32, 62);
  ts::Tensor ac = a.to(kCuda);
  const ts::Tensor bc = b.to(kCuda);
  a += b;
  ac += bc;
  check_close(a, ac, "+= broadcast");
  ts::Tensor at = a.t();
  ts::Tensor act = ac.t();
  at *= 3.0;
  act *= 3.0;
  check_close(a, ac, "*= on a transposed view writes through");
}
