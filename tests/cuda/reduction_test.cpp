// CUDA reductions (sum, prod, mean, amax/amin, max/min with indices, argmax/argmin, var, norm)
// against their CPU twins through the public API, on contiguous, transposed, sliced, expanded and
// zero-size inputs, over inner, outer, several and all dims, and on large inputs that take the
// split (multi-block per output) paths of kernels/cuda/reduction.cu.

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"
#include "tests/cuda/cuda_compare.h"
#include "tests/cuda/cuda_test_util.h"

namespace ts = tessera;

namespace {

using cuda_test::dtype_str;
using cuda_test::kCuda;
using cuda_test::Layout;

// Every layout has shape [4, 5, 6] except the zero-size one ([4, 0, 6]).
std::vector<Layout> layouts() {
  return {
      {"contiguous", {4, 5, 6}, [](const ts::Tensor& t) { return t; }},
      {"transposed",
       {6, 5, 4},
       [](const ts::Tensor& t) {
         return t.permute({2, 1, 0});
       }},
      {"inner transposed", {4, 6, 5}, [](const ts::Tensor& t) { return t.transpose(1, 2); }},
      {"sliced with step",
       {8, 5, 13},
       [](const ts::Tensor& t) { return t.slice(0, 0, 8, 2).slice(2, 1, 13, 2); }},
      {"expand-broadcast",
       {1, 5, 6},
       [](const ts::Tensor& t) {
         return t.expand({4, 5, 6});
       }},
      {"zero-size", {4, 0, 6}, [](const ts::Tensor& t) { return t; }},
  };
}

const std::vector<std::vector<int64_t>> kDims = {{0}, {1}, {2}, {-1}, {0, 2}, {0, 1}, {}};

// Floats in [-2, 2) (plus `offset`), integers in [-4, 5), bools.
ts::Tensor random_values(const ts::Shape& shape, ts::DType dtype, uint64_t seed,
                         double offset = 0.0) {
  ts::Generator gen(seed);
  if (ts::is_floating_point(dtype)) {
    return (ts::rand(shape, ts::kFloat64, &gen) * 4.0 - 2.0 + offset).to(dtype);
  }
  if (dtype == ts::kBool) return ts::randint(0, 2, shape, ts::kBool, &gen);
  return ts::randint(dtype == ts::kUInt8 ? 0 : -4, 5, shape, dtype, &gen);
}

// Exact for integers and bools; floating results within the accumulation order's rounding
// (the device sums in a tree, the host in a cascade), scaled by `scale` for long reductions.
void check_close(const ts::Tensor& expected, const ts::Tensor& got_cuda, const std::string& what,
                 double scale = 1.0) {
  cuda_test::check_close(expected, got_cuda, what,
                         {{1e-5 * scale, 1e-5 * scale},
                          {1e-12 * scale, 1e-12 * scale},
                          {1e-2, 1e-2 * scale},
                          {2e-3, 2e-3 * scale}});
}

using Op = std::function<ts::Tensor(const ts::Tensor&)>;

// Runs op on both devices; where the CPU refuses the input, CUDA must refuse it too.
void compare(const std::string& what, const Op& op, const ts::Tensor& cpu, const ts::Tensor& cuda,
             double scale = 1.0) {
  ts::Tensor expected;
  try {
    expected = op(cpu);
  } catch (const ts::Error&) {
    INFO(what << ": refused on CPU, so on CUDA too");
    CHECK_THROWS_AS(op(cuda), ts::Error);
    return;
  }
  check_close(expected, op(cuda), what, scale);
}

std::string dims_name(const std::vector<int64_t>& dims, bool keepdim) {
  std::string s = "dims {";
  for (int64_t d : dims) s += std::to_string(d) + ",";
  return s + "} keepdim " + (keepdim ? "1" : "0");
}

// Every (layout, dtype, dims, keepdim) of `ops`.
void sweep(
    const std::vector<std::pair<
        std::string,
        std::function<ts::Tensor(const ts::Tensor&, const std::vector<int64_t>&, bool)>>>& ops,
    const std::vector<ts::DType>& dtypes) {
  uint64_t seed = 1;
  for (const Layout& layout : layouts()) {
    for (ts::DType dtype : dtypes) {
      const ts::Tensor base = random_values(layout.base_shape, dtype, seed++);
      const ts::Tensor cpu = layout.view(base);
      const ts::Tensor cuda = layout.view(base.to(kCuda));
      for (const auto& dims : kDims) {
        for (bool keepdim : {false, true}) {
          for (const auto& [name, op] : ops) {
            compare(
                name + " " + layout.name + " " + dtype_str(dtype) + " " + dims_name(dims, keepdim),
                [&](const ts::Tensor& t) { return op(t, dims, keepdim); }, cpu, cuda);
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda sum prod amax amin match the CPU on every layout and dim set",
          "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  sweep({{"sum", [](const ts::Tensor& t, const std::vector<int64_t>& d,
                    bool k) { return ts::sum(t, d, k); }},
         {"prod", [](const ts::Tensor& t, const std::vector<int64_t>& d,
                     bool k) { return ts::prod(t, d, k); }},
         {"amax", [](const ts::Tensor& t, const std::vector<int64_t>& d,
                     bool k) { return ts::amax(t, d, k); }},
         {"amin", [](const ts::Tensor& t, const std::vector<int64_t>& d,
                     bool k) { return ts::amin(t, d, k); }}},
        {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16, ts::kInt64, ts::kInt32,
         ts::kUInt8, ts::kBool});
}

TEST_CASE("cuda mean var norm match the CPU on every layout and dim set", "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  using Dims = std::vector<int64_t>;
  sweep(
      {{"mean", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::mean(t, d, k); }},
       {"var", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::var(t, d, 1, k); }},
       {"var c0", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::var(t, d, 0, k); }},
       {"var c7", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::var(t, d, 7, k); }},
       {"norm 2", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::norm(t, 2, d, k); }},
       {"norm 1", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::norm(t, 1, d, k); }},
       {"norm 0", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::norm(t, 0, d, k); }},
       {"norm 3", [](const ts::Tensor& t, const Dims& d, bool k) { return ts::norm(t, 3, d, k); }},
       {"norm 0.5",
        [](const ts::Tensor& t, const Dims& d, bool k) { return ts::norm(t, 0.5, d, k); }},
       {"norm inf",
        [](const ts::Tensor& t, const Dims& d, bool k) {
          return ts::norm(t, std::numeric_limits<double>::infinity(), d, k);
        }},
       {"norm -inf",
        [](const ts::Tensor& t, const Dims& d, bool k) {
          return ts::norm(t, -std::numeric_limits<double>::infinity(), d, k);
        }}},
      {ts::kFloat32, ts::kFloat64, ts::kBFloat16});
}

TEST_CASE("cuda integer mean var norm are refused like on the CPU", "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor a = ts::arange(12).view({3, 4}).to(kCuda);
  CHECK_THROWS_AS(ts::mean(a), ts::Error);
  CHECK_THROWS_AS(ts::var(a), ts::Error);
  CHECK_THROWS_AS(ts::norm(a), ts::Error);
  CHECK_THROWS_AS(ts::argmax(a.to(ts::kBool)), ts::Error);
  CHECK_THROWS_AS(ts::amax(ts::zeros({0, 3}).to(kCuda)), ts::Error);
}

TEST_CASE("cuda argmax/argmin and max/min(dim) pick the first extreme and NaN first",
          "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  uint64_t seed = 100;
  for (const Layout& layout : layouts()) {
    for (ts::DType dtype :
         {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kInt64, ts::kInt32, ts::kUInt8}) {
      // Few distinct values: many ties.
      ts::Tensor base = random_values(layout.base_shape, dtype, seed++);
      if (ts::is_floating_point(dtype)) base = (base * 2.0).to(ts::kInt64).to(dtype);
      const ts::Tensor cpu = layout.view(base);
      const ts::Tensor cuda = layout.view(base.to(kCuda));
      const std::string what = layout.name + " " + dtype_str(dtype);
      for (int64_t dim : {0, 1, 2, -1}) {
        for (bool keepdim : {false, true}) {
          const std::string w = what + " dim " + std::to_string(dim);
          compare(
              "argmax " + w, [&](const ts::Tensor& t) { return ts::argmax(t, dim, keepdim); }, cpu,
              cuda);
          compare(
              "argmin " + w, [&](const ts::Tensor& t) { return ts::argmin(t, dim, keepdim); }, cpu,
              cuda);
          compare(
              "max values " + w,
              [&](const ts::Tensor& t) { return ts::max(t, dim, keepdim).first; }, cpu, cuda);
          compare(
              "max indices " + w,
              [&](const ts::Tensor& t) { return ts::max(t, dim, keepdim).second; }, cpu, cuda);
          compare(
              "min indices " + w,
              [&](const ts::Tensor& t) { return ts::min(t, dim, keepdim).second; }, cpu, cuda);
        }
      }
      compare(
          "argmax flat " + what, [](const ts::Tensor& t) { return ts::argmax(t); }, cpu, cuda);
      compare(
          "argmin flat " + what, [](const ts::Tensor& t) { return ts::argmin(t); }, cpu, cuda);
      compare(
          "max all " + what, [](const ts::Tensor& t) { return ts::max(t); }, cpu, cuda);
      compare(
          "min all " + what, [](const ts::Tensor& t) { return ts::min(t); }, cpu, cuda);
    }
  }
  // NaN is the extreme of both argmax and argmin, and amax/amin propagate it.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const ts::Tensor x = ts::from_vector<double>({1, nan, 5, nan, 5, -3, 2, 2}, {2, 4});
  for (ts::DType dtype : {ts::kFloat32, ts::kFloat64, ts::kBFloat16}) {
    const ts::Tensor c = x.to(dtype);
    const ts::Tensor g = c.to(kCuda);
    for (int64_t dim : {0, 1}) {
      check_close(ts::argmax(c, dim), ts::argmax(g, dim), "argmax NaN");
      check_close(ts::argmin(c, dim), ts::argmin(g, dim), "argmin NaN");
      check_close(ts::amax(c, {dim}), ts::amax(g, {dim}), "amax NaN");
      check_close(ts::amin(c, {dim}), ts::amin(g, {dim}), "amin NaN");
    }
    CHECK(ts::argmax(g).item<int64_t>() == 1);
    CHECK(ts::argmin(g).item<int64_t>() == 1);
  }
}

TEST_CASE("cuda reductions of large inputs take the split paths and match the CPU",
          "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  struct Case {
    std::string name;
    ts::Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {"all of 1<<20", {1 << 20}, {}},            // one output, inner split
      {"rows of 4099", {64, 4099}, {1}},          // a block per row
      {"few long rows", {3, 1 << 18}, {1}},       // inner split across parts
      {"outer of tall", {1 << 16, 16}, {0}},      // outer split
      {"outer of wide", {300, 4099}, {0}},        // outer, many outputs
      {"middle dim", {16, 4099, 8}, {1}},         // outer with strided outputs
      {"two outer dims", {64, 33, 129}, {0, 2}},  // non-adjacent dims
      {"transposed all", {1024, 1025}, {}},       // coalesced into one run
  };
  uint64_t seed = 200;
  for (const Case& c : cases) {
    for (ts::DType dtype : {ts::kFloat32, ts::kBFloat16, ts::kFloat64, ts::kInt64}) {
      const ts::Tensor base = random_values(c.shape, dtype, seed++);
      const ts::Tensor cpu = c.name == "transposed all" ? base.t() : base;
      const ts::Tensor cuda = c.name == "transposed all" ? base.to(kCuda).t() : base.to(kCuda);
      const std::string what = c.name + " " + dtype_str(dtype);
      // Sums of ~1e6 values of magnitude 1 round at ~1e-7 * sqrt(n) relative per step.
      const double scale = 100.0;
      compare(
          "sum " + what, [&](const ts::Tensor& t) { return ts::sum(t, c.dims); }, cpu, cuda, scale);
      compare(
          "amax " + what, [&](const ts::Tensor& t) { return ts::amax(t, c.dims); }, cpu, cuda);
      if (c.dims.size() == 1) {
        compare(
            "argmax " + what, [&](const ts::Tensor& t) { return ts::argmax(t, c.dims[0]); }, cpu,
            cuda);
      }
      if (ts::is_floating_point(dtype)) {
        compare(
            "mean " + what, [&](const ts::Tensor& t) { return ts::mean(t, c.dims); }, cpu, cuda,
            scale);
        compare(
            "var " + what, [&](const ts::Tensor& t) { return ts::var(t, c.dims); }, cpu, cuda,
            scale);
        compare(
            "norm " + what, [&](const ts::Tensor& t) { return ts::norm(t, 2, c.dims); }, cpu, cuda,
            scale);
      }
    }
  }
}

TEST_CASE("cuda argmax of a long row finds the first of two equal maxima", "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  const int64_t n = int64_t{1} << 20;
  ts::Tensor x = ts::zeros({n});
  float* p = x.data_ptr<float>();
  p[700001] = 3.0f;
  p[900001] = 3.0f;
  p[12] = -3.0f;
  p[n - 1] = -3.0f;
  const ts::Tensor g = x.to(kCuda);
  CHECK(ts::argmax(g).item<int64_t>() == 700001);
  CHECK(ts::argmin(g).item<int64_t>() == 12);
  CHECK(ts::argmax(g.view({2, n / 2}), 1).cpu().to_vector<int64_t>() ==
        std::vector<int64_t>{0, 700001 - n / 2});
}

TEST_CASE("cuda var stays accurate for data with a large mean", "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor centered = random_values({8, 4099}, ts::kFloat64, 300);
  const ts::Tensor shifted = (centered + 1e4).to(ts::kFloat32);
  const ts::Tensor expected = ts::var(centered, {1});  // float64, no offset
  for (const ts::Tensor& input : {shifted, shifted.t().contiguous().t()}) {
    const ts::Tensor got = ts::var(input.to(kCuda), {1}).cpu().to(ts::kFloat64);
    // float32 storage of 1e4 + x keeps ~1e-3 of x: the variance (~1.33) to ~1e-3 relative.
    CHECK(ts::allclose(got, expected, 2e-3, 1e-3));
  }
  const ts::Tensor all = ts::var((centered + 1e4).to(ts::kFloat32).to(kCuda)).cpu();
  CHECK(std::abs(all.item<float>() - ts::var(centered).item<double>()) < 2e-3);
}

TEST_CASE("cuda reductions give the same bits run to run", "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor x = random_values({1 << 20}, ts::kFloat32, 400).to(kCuda);
  const ts::Tensor a = ts::sum(x);
  const ts::Tensor b = ts::sum(x);
  CHECK(ts::equal(a.cpu(), b.cpu()));
  const ts::Tensor m = x.view({1 << 10, 1 << 10});
  CHECK(ts::equal(ts::var(m, {0}).cpu(), ts::var(m, {0}).cpu()));
  CHECK(ts::equal(ts::norm(m, 2, {1}).cpu(), ts::norm(m, 2, {1}).cpu()));
}

TEST_CASE("cuda sum of integers wraps like the CPU and bools count", "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  const int64_t big = std::numeric_limits<int64_t>::max();
  const ts::Tensor a = ts::from_vector<int64_t>({big, big, 3, -5}, {4});
  check_close(ts::sum(a), ts::sum(a.to(kCuda)), "int64 sum wraps");
  check_close(ts::prod(a), ts::prod(a.to(kCuda)), "int64 prod wraps");
  const ts::Tensor b = ts::from_vector<bool>({true, false, true, true, false, true}, {2, 3});
  check_close(ts::sum(b, {1}), ts::sum(b.to(kCuda), {1}), "bool sum");
  check_close(ts::sum(b, {}, false, ts::kFloat32), ts::sum(b.to(kCuda), {}, false, ts::kFloat32),
              "bool sum as float32");
  check_close(ts::amax(b, {0}), ts::amax(b.to(kCuda), {0}), "bool amax");
}

TEST_CASE("cuda reductions of 0-dim and empty-reduction inputs match the CPU",
          "[cuda][reduction]") {
  TS_REQUIRE_CUDA_DEVICE();
  const ts::Tensor s = ts::full({}, 2.5);
  check_close(ts::sum(s), ts::sum(s.to(kCuda)), "0-dim sum");
  check_close(ts::var(s), ts::var(s.to(kCuda)), "0-dim var");
  check_close(ts::argmax(s), ts::argmax(s.to(kCuda)), "0-dim argmax");
  const ts::Tensor e = ts::zeros({3, 0, 2});
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{1}, {0, 1}}) {
    check_close(ts::sum(e, dims), ts::sum(e.to(kCuda), dims), "empty sum is 0");
    check_close(ts::prod(e, dims), ts::prod(e.to(kCuda), dims), "empty prod is 1");
    check_close(ts::mean(e, dims), ts::mean(e.to(kCuda), dims), "empty mean is nan");
    check_close(ts::var(e, dims), ts::var(e.to(kCuda), dims), "empty var is nan");
    check_close(ts::norm(e, 2, dims), ts::norm(e.to(kCuda), 2, dims), "empty norm is 0");
  }
}
