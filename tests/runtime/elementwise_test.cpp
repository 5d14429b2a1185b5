#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/runtime/dispatch.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// ---- independent reference helpers: raw strided reads and naive float64 math ----

double read_element(const char* p, DType dtype) {
  switch (dtype) {
    case kBool:
      return *reinterpret_cast<const bool*>(p) ? 1.0 : 0.0;
    case kUInt8:
      return *reinterpret_cast<const uint8_t*>(p);
    case kInt32:
      return *reinterpret_cast<const int32_t*>(p);
    case kInt64:
      return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case kFloat16:
      return static_cast<float>(*reinterpret_cast<const Half*>(p));
    case kBFloat16:
      return static_cast<float>(*reinterpret_cast<const BFloat16*>(p));
    case kFloat32:
      return *reinterpret_cast<const float*>(p);
    case kFloat64:
      return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

// The values of t broadcast to `shape`, in row-major order, read through t's own strides.
std::vector<double> logical_values(const Tensor& t, const Shape& shape) {
  std::vector<double> out(static_cast<size_t>(shape.numel()));
  const char* base = static_cast<const char*>(t.raw_data());
  const int64_t lead = shape.ndim() - t.dim();
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), offset = 0;
    for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
      const int64_t idx = rem % shape[d];
      rem /= shape[d];
      if (d >= lead && t.size(d - lead) != 1) offset += idx * t.stride(d - lead);
    }
    out[i] = read_element(base + offset * static_cast<int64_t>(t.element_size()), t.dtype());
  }
  return out;
}
std::vector<double> logical_values(const Tensor& t) { return logical_values(t, t.sizes()); }

struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case kFloat64:
      return {1e-12, 1e-12};
    case kFloat32:
      return {1e-5, 1e-6};
    case kFloat16:
      return {2e-3, 1e-4};
    case kBFloat16:
      return {8e-3, 1e-3};
    default:
      return {0, 0};
  }
}

// "" when got matches want within dtype's tolerance, else the first mismatch.
std::string mismatch(const std::vector<double>& got, const std::vector<double>& want, DType dtype) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  const Tolerance tol = tolerance(dtype);
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (got[i] == want[i]) continue;
    if (std::abs(got[i] - want[i]) <= tol.atol + tol.rtol * std::abs(want[i])) continue;
    std::ostringstream os;
    os << "element " << i << ": got " << got[i] << ", want " << want[i];
    return os.str();
  }
  return "";
}

// Deterministic samples in [lo, hi] (integers when integral).
std::vector<double> samples(int64_t n, double lo, double hi, uint64_t seed, bool integral) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * 0x1p-53;
    x = integral ? std::floor(lo + u * (hi - lo + 1)) : lo + u * (hi - lo);
  }
  return v;
}

Tensor filled(const Shape& shape, DType dtype, double lo, double hi, uint64_t seed) {
  return from_vector(samples(shape.numel(), lo, hi, seed, !is_floating_point(dtype)), shape)
      .to(dtype);
}

enum class Layout { kContiguous, kTransposed, kSliced, kExpanded, kZeroDim, kEmpty };
const Layout kLayouts[] = {Layout::kContiguous, Layout::kTransposed, Layout::kSliced,
                           Layout::kExpanded,   Layout::kZeroDim,    Layout::kEmpty};

// A tensor of shape [3, 4] (or [] / [0, 4]) with the given memory layout.
Tensor make_input(Layout layout, DType dtype, double lo, double hi, uint64_t seed) {
  switch (layout) {
    case Layout::kContiguous:
      return filled({3, 4}, dtype, lo, hi, seed);
    case Layout::kTransposed:
      return filled({4, 3}, dtype, lo, hi, seed).t();
    case Layout::kSliced:
      return filled({3, 8}, dtype, lo, hi, seed).slice(1, 0, 8, 2);
    case Layout::kExpanded:
      return filled({1, 4}, dtype, lo, hi, seed).expand({3, 4});
    case Layout::kZeroDim:
      return filled({}, dtype, lo, hi, seed);
    case Layout::kEmpty:
      return filled({0, 4}, dtype, lo, hi, seed);
  }
  return {};
}

const char* layout_name(Layout l) {
  const char* names[] = {"contiguous", "transposed", "sliced", "expanded", "0-dim", "zero-size"};
  return names[static_cast<int>(l)];
}

// ---- unary ----

struct UnaryCase {
  UnaryOp op;
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  double lo, hi;
  bool floating;  // result is floating (int inputs give float32)
};

double ref_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<UnaryCase> unary_cases() {
  return {
      {UnaryOp::kNeg, [](const Tensor& t) { return -t; }, [](double x) { return -x; }, -5, 5,
       false},
      {UnaryOp::kAbs, [](const Tensor& t) { return abs(t); }, [](double x) { return std::abs(x); },
       -5, 5, false},
      {UnaryOp::kRelu, [](const Tensor& t) { return relu(t); },
       [](double x) { return x < 0 ? 0.0 : x; }, -5, 5, false},
      {UnaryOp::kExp, [](const Tensor& t) { return exp(t); }, [](double x) { return std::exp(x); },
       -4, 4, true},
      {UnaryOp::kLog, [](const Tensor& t) { return log(t); }, [](double x) { return std::log(x); },
       1, 9, true},
      {UnaryOp::kSqrt, [](const Tensor& t) { return sqrt(t); },
       [](double x) { return std::sqrt(x); }, 1, 9, true},
      {UnaryOp::kRsqrt, [](const Tensor& t) { return rsqrt(t); },
       [](double x) { return 1 / std::sqrt(x); }, 1, 9, true},
      {UnaryOp::kTanh, [](const Tensor& t) { return tanh(t); },
       [](double x) { return std::tanh(x); }, -4, 4, true},
      {UnaryOp::kSigmoid, [](const Tensor& t) { return sigmoid(t); }, ref_sigmoid, -6, 6, true},
      {UnaryOp::kSilu, [](const Tensor& t) { return silu(t); },
       [](double x) { return x * ref_sigmoid(x); }, -6, 6, true},
      {UnaryOp::kGelu, [](const Tensor& t) { return gelu(t); }, ref_gelu, -4, 4, true},
      {UnaryOp::kErf, [](const Tensor& t) { return erf(t); }, [](double x) { return std::erf(x); },
       -3, 3, true},
      {UnaryOp::kErfc, [](const Tensor& t) { return erfc(t); },
       [](double x) { return std::erfc(x); }, -3, 3, true},
  };
}

// ---- binary ----

struct BinaryCase {
  BinaryOp op;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<double(double, double)> ref;
  double a_lo, a_hi, b_lo, b_hi;
};

std::vector<BinaryCase> binary_cases() {
  using T = const Tensor&;
  return {
      {BinaryOp::kAdd, [](T a, T b) { return a + b; }, [](double a, double b) { return a + b; }, -9,
       9, -9, 9},
      {BinaryOp::kSub, [](T a, T b) { return a - b; }, [](double a, double b) { return a - b; }, -9,
       9, -9, 9},
      {BinaryOp::kMul, [](T a, T b) { return a * b; }, [](double a, double b) { return a * b; }, -9,
       9, -9, 9},
      {BinaryOp::kDiv, [](T a, T b) { return a / b; }, [](double a, double b) { return a / b; }, -9,
       9, 1, 5},
      {BinaryOp::kPow, [](T a, T b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 1, 3, 0, 3},
      {BinaryOp::kMaximum, [](T a, T b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }, -3, 3, -3, 3},
      {BinaryOp::kMinimum, [](T a, T b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }, -3, 3, -3, 3},
      {BinaryOp::kEq, [](T a, T b) { return a == b; },
       [](double a, double b) { return double(a == b); }, -2, 2, -2, 2},
      {BinaryOp::kNe, [](T a, T b) { return a != b; },
       [](double a, double b) { return double(a != b); }, -2, 2, -2, 2},
      {BinaryOp::kLt, [](T a, T b) { return a < b; },
       [](double a, double b) { return double(a < b); }, -2, 2, -2, 2},
      {BinaryOp::kLe, [](T a, T b) { return a <= b; },
       [](double a, double b) { return double(a <= b); }, -2, 2, -2, 2},
      {BinaryOp::kGt, [](T a, T b) { return a > b; },
       [](double a, double b) { return double(a > b); }, -2, 2, -2, 2},
      {BinaryOp::kGe, [](T a, T b) { return a >= b; },
       [](double a, double b) { return double(a >= b); }, -2, 2, -2, 2},
      {BinaryOp::kLogicalAnd, [](T a, T b) { return logical_and(a, b); },
       [](double a, double b) { return double(a != 0 && b != 0); }, -1, 1, -1, 1},
      {BinaryOp::kLogicalOr, [](T a, T b) { return logical_or(a, b); },
       [](double a, double b) { return double(a != 0 || b != 0); }, -1, 1, -1, 1},
  };
}

bool is_compare(BinaryOp op) {
  return op >= BinaryOp::kEq;  // the comparisons and logical ops close the op table
}

DType expected_binary_dtype(BinaryOp op, DType in) {
  if (is_compare(op)) return kBool;
  if (op == BinaryOp::kDiv && !is_floating_point(in)) return kFloat32;
  return in;
}

void check_binary(const BinaryCase& c, const Tensor& a, const Tensor& b, DType dtype) {
  const Tensor out = c.fn(a, b);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "test");
  REQUIRE(out.sizes() == shape);
  CHECK(out.dtype() == expected_binary_dtype(c.op, dtype));
  const auto av = logical_values(a, shape), bv = logical_values(b, shape);
  std::vector<double> want(av.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = c.ref(av[i], bv[i]);
  CHECK(mismatch(logical_values(out), want, out.dtype()) == "");
}

}  // namespace

TEST_CASE("unary ops match a float64 reference on every layout", "[runtime][elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64}) {
      if (dtype == kInt64 && (c.op == UnaryOp::kGelu || c.op == UnaryOp::kSilu)) continue;
      for (Layout layout : kLayouts) {
        INFO(op_name(c.op) << " " << dtype << " " << layout_name(layout));
        const Tensor in = make_input(layout, dtype, c.lo, c.hi, 7);
        const Tensor out = c.fn(in);
        REQUIRE(out.sizes() == in.sizes());
        const DType want_dtype = c.floating && dtype == kInt64 ? kFloat32 : dtype;
        CHECK(out.dtype() == want_dtype);
        CHECK(unary_op(c.op, in).dtype() == want_dtype);
        std::vector<double> want = logical_values(in);
        for (double& w : want) w = c.ref(w);
        CHECK(mismatch(logical_values(out), want, want_dtype) == "");
      }
    }
  }
}

TEST_CASE("unary ops on long runs take the vectorized path correctly", "[runtime][elementwise]") {
  // 1000 elements: full Eigen packets plus a tail, and several conversion blocks for bfloat16.
  for (const UnaryCase& c : unary_cases()) {
    for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
      INFO(op_name(c.op) << " " << dtype);
      const Tensor in = filled({1000}, dtype, c.lo, c.hi, 3);
      std::vector<double> want = logical_values(in);
      for (double& w : want) w = c.ref(w);
      CHECK(mismatch(logical_values(c.fn(in)), want, dtype) == "");
    }
  }
}

TEST_CASE("gelu tanh approximation and special values", "[runtime][elementwise]") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor x = filled({37}, dtype, -5, 5, 11);
    std::vector<double> want = logical_values(x);
    for (double& v : want) {
      v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    }
    const Tensor y = gelu(x, "tanh");
    CHECK(y.dtype() == dtype);
    CHECK(mismatch(logical_values(y), want, dtype) == "");
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor s = from_vector<float>({nan, inf, -inf, 0.0f, -100.0f, 100.0f}, {6});
  const auto r = relu(s).to_vector<float>();
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == inf);
  CHECK(r[2] == 0);
  const auto sg = sigmoid(s).to_vector<float>();
  CHECK(std::isnan(sg[0]));
  CHECK(sg[1] == 1.0f);
  CHECK(sg[2] == 0.0f);
  CHECK(sg[4] >= 0.0f);
  CHECK(sg[4] < 1e-30f);
  const auto e = exp(s).to_vector<float>();
  CHECK(std::isnan(e[0]));
  CHECK(e[1] == inf);
  CHECK(e[2] == 0.0f);
  CHECK(e[4] == std::exp(-100.0f));
  CHECK(e[5] == inf);
  // Without extreme negative arguments in the block: the vectorized path.
  const auto ev =
      exp(from_vector<float>({nan, 89.0f, 100.0f, inf, 1.0f, -86.0f}, {6})).to_vector<float>();
  CHECK(std::isnan(ev[0]));
  CHECK(ev[1] == inf);
  CHECK(ev[2] == inf);
  CHECK(ev[3] == inf);
  CHECK(ev[4] == Approx(std::exp(1.0f)));
  CHECK(ev[5] == Approx(std::exp(-86.0f)));
  const auto evd = exp(from_vector<double>({710.0, 1.0, -700.0}, {3})).to_vector<double>();
  CHECK(evd[0] == std::numeric_limits<double>::infinity());
  CHECK(evd[2] == Approx(std::exp(-700.0)));
  CHECK(exp(from_vector<double>({-1000.0, -745.5}, {2})).to_vector<double>() ==
        std::vector<double>{0.0, std::exp(-745.5)});
  CHECK(log(from_vector<float>({0.0f}, {1})).item<float>() == -inf);
  CHECK(std::isnan(log(from_vector<float>({-1.0f}, {1})).item<float>()));
  CHECK(std::isnan(sqrt(from_vector<float>({-1.0f}, {1})).item<float>()));
  CHECK(rsqrt(from_vector<float>({0.0f}, {1})).item<float>() == inf);
  const auto th = tanh(s).to_vector<float>();
  CHECK(th[1] == 1.0f);
  CHECK(th[2] == -1.0f);
}

// Sigmoid and silu far into the tails, where approximations lose relative accuracy.
TEST_CASE("sigmoid and silu keep relative accuracy in the tails", "[runtime][elementwise]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor x = filled({300}, dtype, -30, 30, 13);
    std::vector<double> sig = logical_values(x), si = logical_values(x);
    for (size_t i = 0; i < sig.size(); ++i) {
      sig[i] = ref_sigmoid(sig[i]);
      si[i] *= sig[i];
    }
    CHECK(mismatch(logical_values(sigmoid(x)), sig, dtype) == "");
    CHECK(mismatch(logical_values(silu(x)), si, dtype) == "");
  }
}

TEST_CASE("logical_not on every dtype gives bool", "[runtime][elementwise]") {
  for (DType dtype : {kBool, kUInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    const Tensor t = from_vector<double>({0, 1, 0, 2}, {2, 2}).to(dtype).t();
    const Tensor r = logical_not(t);
    CHECK(r.dtype() == kBool);
    CHECK(r.to_vector<bool>() == std::vector<bool>{true, true, false, false});
  }
}

TEST_CASE("binary ops match a float64 reference on every layout", "[runtime][elementwise]") {
  for (const BinaryCase& c : binary_cases()) {
    for (DType dtype : {kFloat32, kFloat64, kInt64, kBFloat16}) {
      for (Layout la : kLayouts) {
        for (Layout lb : {Layout::kContiguous, Layout::kTransposed, Layout::kSliced,
                          Layout::kExpanded, Layout::kZeroDim}) {
          if (la == Layout::kEmpty && lb != Layout::kExpanded && lb != Layout::kZeroDim) continue;
          INFO(op_name(c.op) << " " << dtype << " " << layout_name(la) << " x " << layout_name(lb));
          const Tensor a = make_input(la, dtype, c.a_lo, c.a_hi, 1);
          Tensor b = make_input(lb, dtype, c.b_lo, c.b_hi, 2);
          if (la == Layout::kEmpty && lb == Layout::kExpanded) b = b.slice(0, 0, 1);
          check_binary(c, a, b, dtype);
        }
      }
    }
  }
}

TEST_CASE("binary ops broadcast [3,1] x [1,4] and scalars", "[runtime][elementwise]") {
  for (const BinaryCase& c : binary_cases()) {
    for (DType dtype : {kFloat32, kInt64, kBFloat16, kFloat16}) {
      INFO(op_name(c.op) << " " << dtype);
      const Tensor a = filled({3, 1}, dtype, c.a_lo, c.a_hi, 5);
      const Tensor b = filled({1, 4}, dtype, c.b_lo, c.b_hi, 6);
      check_binary(c, a, b, dtype);
      check_binary(c, b.t(), a.t(), dtype);
      // Long rows: stride-0 fast paths, several conversion blocks.
      check_binary(c, filled({2, 700}, dtype, c.a_lo, c.a_hi, 8),
                   filled({2, 1}, dtype, c.b_lo, c.b_hi, 9), dtype);
      check_binary(c, filled({700}, dtype, c.a_lo, c.a_hi, 8).slice(0, 0, 700, 3),
                   filled({234}, dtype, c.b_lo, c.b_hi, 9), dtype);
    }
  }
}

TEST_CASE("tensor-scalar ops promote like Python numbers", "[runtime][elementwise]") {
  const Tensor i = from_vector<int64_t>({1, 2, 3}, {3});
  CHECK((i + 1).dtype() == kInt64);
  CHECK((i + 1).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
  CHECK((i + 1.5).dtype() == kFloat32);
  CHECK((i + 1.5).to_vector<float>() == std::vector<float>{2.5f, 3.5f, 4.5f});
  CHECK((i / 2).dtype() == kFloat32);
  CHECK((i / 2).to_vector<float>() == std::vector<float>{0.5f, 1.0f, 1.5f});
  CHECK((10 - i).to_vector<int64_t>() == std::vector<int64_t>{9, 8, 7});
  CHECK((3 / i.to(kFloat64)).to_vector<double>() == std::vector<double>{3.0, 1.5, 1.0});
  CHECK((2 * i).to_vector<int64_t>() == std::vector<int64_t>{2, 4, 6});
  CHECK((1 + i).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
  const Tensor h = from_vector<float>({1.0f, 2.0f}, {2}).to(kFloat16);
  CHECK((h + 2.0).dtype() == kFloat16);
  CHECK((h * 0.5).to_vector<float>() == std::vector<float>{0.5f, 1.0f});
  const Tensor bl = from_vector<bool>({true, false}, {2});
  CHECK((bl + 1).dtype() == kInt64);
  CHECK((bl + 1).to_vector<int64_t>() == std::vector<int64_t>{2, 1});
  CHECK((bl + true).dtype() == kBool);
  CHECK((i > 1).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK((i <= 2.5).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK((i == 2).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK((i != 2).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(pow(i, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 4, 9});
  CHECK(pow(i, 0.5).dtype() == kFloat32);
  CHECK(pow(from_vector<float>({4.0f, 9.0f}, {2}), 0.5).to_vector<float>() ==
        std::vector<float>{2.0f, 3.0f});
  // uint8 keeps its type and wraps, as torch.
  const Tensor u = from_vector<uint8_t>({250, 1}, {2});
  CHECK((u + 10).dtype() == kUInt8);
  CHECK((u + 10).to_vector<uint8_t>() == std::vector<uint8_t>{4, 11});
}

TEST_CASE("add and sub with alpha", "[runtime][elementwise]") {
  const Tensor a = from_vector<float>({1, 2, 3}, {3});
  const Tensor b = from_vector<float>({10, 20, 30}, {3});
  CHECK(add(a, b, 2).to_vector<float>() == std::vector<float>{21, 42, 63});
  CHECK(sub(a, b, 0.5).to_vector<float>() == std::vector<float>{-4, -8, -12});
  CHECK(add(a, b, 1.0).to_vector<float>() == std::vector<float>{11, 22, 33});
  const Tensor i = from_vector<int64_t>({1, 2}, {2});
  CHECK(add(i, i, 3).to_vector<int64_t>() == std::vector<int64_t>{4, 8});
  CHECK_THROWS_WITH(add(i, i, 0.5), Catch::Contains("[add]") && Catch::Contains("alpha"));
  // Half: a + alpha * b is rounded once (0.1 * 3 = 0.3 is not rounded to half on the way).
  const Tensor h = from_vector<float>({1, 2}, {2}).to(kFloat16);
  const Tensor three = from_vector<float>({3, 3}, {2}).to(kFloat16);
  const Tensor r = add(h, three, 0.1);
  CHECK(r.dtype() == kFloat16);
  CHECK(r.to_vector<float>() ==
        std::vector<float>{static_cast<float>(Half(1.3f)), static_cast<float>(Half(2.3f))});
  CHECK_THROWS_AS(add(a, b, true), DTypeError);
}

TEST_CASE("integer ops are exact and wrap like PyTorch", "[runtime][elementwise]") {
  const int64_t big = (int64_t{1} << 53) + 1;  // not representable in float64
  const Tensor i = from_vector<int64_t>({big, -7, std::numeric_limits<int64_t>::max()}, {3});
  CHECK((i + 1).to_vector<int64_t>() ==
        std::vector<int64_t>{big + 1, -6, std::numeric_limits<int64_t>::min()});
  CHECK((-i).to_vector<int64_t>()[1] == 7);
  CHECK(abs(i).to_vector<int64_t>()[1] == 7);
  CHECK((i * 2).to_vector<int64_t>()[0] == 2 * big);
  CHECK(maximum(i, from_vector<int64_t>({0}, {1})).to_vector<int64_t>()[1] == 0);
  // Integer pow: negative tensor exponents give 0 except for bases 1 and -1.
  const Tensor base = from_vector<int64_t>({2, 1, -1, -1, 3}, {5});
  const Tensor e = from_vector<int64_t>({-1, -5, -3, -2, 3}, {5});
  CHECK(pow(base, e).to_vector<int64_t>() == std::vector<int64_t>{0, 1, -1, 1, 27});
  CHECK(pow(from_vector<int32_t>({3}, {1}), from_vector<int32_t>({40}, {1})).dtype() == kInt32);
  // True division by zero of integers gives inf / nan in float32 and does not crash.
  const auto q =
      (from_vector<int64_t>({1, 0}, {2}) / from_vector<int64_t>({0, 0}, {2})).to_vector<float>();
  CHECK(std::isinf(q[0]));
  CHECK(std::isnan(q[1]));
}

TEST_CASE("maximum and minimum propagate NaN", "[runtime][elementwise]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = from_vector<float>({nan, 1, 2, nan}, {4});
  const Tensor b = from_vector<float>({1, nan, 3, nan}, {4});
  for (const Tensor& r : {maximum(a, b), minimum(a, b), maximum(b, a), minimum(b, a)}) {
    const auto v = r.to_vector<float>();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[3]));
  }
  CHECK(maximum(a, b).to_vector<float>()[2] == 3);
  CHECK(minimum(a, b).to_vector<float>()[2] == 2);
}

TEST_CASE("where selects with broadcasting and promotion", "[runtime][elementwise]") {
  for (DType dtype : {kFloat32, kInt64, kBFloat16, kFloat64}) {
    INFO(dtype);
    const Tensor cond = from_vector<bool>({true, false, true}, {3, 1});
    const Tensor a = filled({1, 4}, dtype, -5, 5, 1);
    const Tensor b = filled({4, 3}, dtype, -5, 5, 2).t();
    const Tensor out = where(cond, a, b);
    REQUIRE(out.sizes() == Shape{3, 4});
    CHECK(out.dtype() == dtype);
    const Shape shape{3, 4};
    const auto c = logical_values(cond, shape), av = logical_values(a, shape),
               bv = logical_values(b, shape);
    std::vector<double> want(c.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = c[i] != 0 ? av[i] : bv[i];
    CHECK(mismatch(logical_values(out), want, dtype) == "");
  }
  const Tensor mixed =
      where(from_vector<bool>({true, false}, {2}), from_vector<int64_t>({1, 2}, {2}),
            from_vector<float>({0.5f, 0.25f}, {2}));
  CHECK(mixed.dtype() == kFloat32);
  CHECK(mixed.to_vector<float>() == std::vector<float>{1.0f, 0.25f});
  const Tensor long_cond = filled({1000}, kInt64, 0, 1, 4).to(kBool);
  const Tensor x = filled({1000}, kFloat32, -1, 1, 5);
  const Tensor y = filled({1000}, kFloat32, -1, 1, 6);
  const auto cv = logical_values(long_cond), xv = logical_values(x), yv = logical_values(y);
  std::vector<double> want(1000);
  for (size_t i = 0; i < want.size(); ++i) want[i] = cv[i] != 0 ? xv[i] : yv[i];
  CHECK(mismatch(logical_values(where(long_cond, x, y)), want, kFloat32) == "");
  CHECK(where(from_vector<bool>({}, {0}), x.slice(0, 0, 0), y.slice(0, 0, 0)).numel() == 0);
}

TEST_CASE("clamp with optional bounds", "[runtime][elementwise]") {
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBFloat16}) {
    for (Layout layout : kLayouts) {
      INFO(dtype << " " << layout_name(layout));
      const Tensor in = make_input(layout, dtype, -6, 6, 3);
      const auto v = logical_values(in);
      std::vector<double> lo_hi(v.size()), lo_only(v.size()), hi_only(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        lo_hi[i] = std::min(std::max(v[i], -2.0), 3.0);
        lo_only[i] = std::max(v[i], -2.0);
        hi_only[i] = std::min(v[i], 3.0);
      }
      CHECK(mismatch(logical_values(clamp(in, -2, 3)), lo_hi, dtype) == "");
      CHECK(mismatch(logical_values(clamp(in, -2)), lo_only, dtype) == "");
      CHECK(mismatch(logical_values(clamp(in, std::nullopt, 3)), hi_only, dtype) == "");
      CHECK(clamp(in, -2, 3).dtype() == dtype);
    }
  }
  // min > max gives max, as torch; a float bound promotes an integer tensor.
  CHECK(clamp(from_vector<float>({0, 5}, {2}), 4, 1).to_vector<float>() ==
        std::vector<float>{1, 1});
  const Tensor c = clamp(from_vector<int64_t>({1, 2, 3}, {3}), 1.5);
  CHECK(c.dtype() == kFloat32);
  CHECK(c.to_vector<float>() == std::vector<float>{1.5f, 2, 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(clamp(from_vector<float>({nan}, {1}), 0, 1).item<float>()));
}

TEST_CASE("in-place ops write through views and bump the version", "[runtime][elementwise]") {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const uint64_t v0 = a.storage()->version();
  a += from_vector<float>({10, 20, 30}, {3});
  CHECK(a.to_vector<float>() == std::vector<float>{11, 22, 33, 14, 25, 36});
  CHECK(a.storage()->version() > v0);
  a -= 1;
  a *= 2.0;
  a /= from_vector<float>({2}, {1});
  CHECK(a.to_vector<float>() == std::vector<float>{10, 21, 32, 13, 24, 35});
  // A strided view of a larger tensor is updated in place; the rest stays.
  Tensor base = from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4});
  Tensor col = base.slice(1, 0, 4, 2);
  col += 100;
  CHECK(base.to_vector<float>() == std::vector<float>{100, 1, 102, 3, 104, 5, 106, 7});
  // Lower-precision self: computed in the promoted type, cast back.
  Tensor h = from_vector<float>({1, 2}, {2}).to(kBFloat16);
  h += from_vector<double>({0.5, 0.25}, {2});
  CHECK(h.dtype() == kBFloat16);
  CHECK(h.to_vector<float>() == std::vector<float>{1.5f, 2.25f});
  Tensor i = from_vector<int64_t>({1, 2}, {2});
  i += true;
  i *= from_vector<int32_t>({3, 4}, {2});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{6, 12});
  Tensor f = from_vector<float>({1, 2}, {2});
  binary_op_(BinaryOp::kLt, f, from_vector<float>({2, 2}, {2}));
  CHECK(f.to_vector<float>() == std::vector<float>{1, 0});
  Tensor empty = from_vector<float>({}, {0, 3});
  empty += 1;
  CHECK(empty.numel() == 0);
}

TEST_CASE("in-place ops handle aliasing", "[runtime][elementwise]") {
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  a += a.t();  // must read the original a.t() everywhere
  CHECK(a.to_vector<float>() == std::vector<float>{2, 5, 5, 8});
  Tensor b = from_vector<float>({1, 2, 3, 4}, {2, 2});
  b *= b;
  CHECK(b.to_vector<float>() == std::vector<float>{1, 4, 9, 16});
  Tensor c = from_vector<float>({1, 2, 3, 4}, {2, 2});
  c += c.select(0, 1);  // broadcast row overlapping self
  CHECK(c.to_vector<float>() == std::vector<float>{4, 6, 6, 8});
  Tensor d = from_vector<float>({1, 2, 3, 4, 5}, {5});
  Tensor head = d.slice(0, 1, 5);
  head -= d.slice(0, 0, 4);  // overlapping shifted windows
  CHECK(d.to_vector<float>() == std::vector<float>{1, 1, 1, 1, 1});
}

TEST_CASE("elementwise errors name the op, shapes and dtypes", "[runtime][elementwise]") {
  const Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector<float>({1, 2, 3, 4}, {4});
  CHECK_THROWS_AS(add(a, b), ShapeError);
  CHECK_THROWS_WITH(
      add(a, b), Catch::Contains("[add]") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(a * b, Catch::Contains("[mul]"));
  CHECK_THROWS_WITH(a < b, Catch::Contains("[lt]"));
  Tensor i = from_vector<int64_t>({1, 2, 3}, {3});
  CHECK_THROWS_AS(i += from_vector<float>({1, 2, 3}, {3}), DTypeError);
  CHECK_THROWS_WITH(i += from_vector<float>({1, 2, 3}, {3}), Catch::Contains("[add_]") &&
                                                                 Catch::Contains("float32") &&
                                                                 Catch::Contains("int64"));
  CHECK_THROWS_WITH(i /= 2, Catch::Contains("[div_]") && Catch::Contains("float32"));
  CHECK_THROWS_WITH(i *= 1.5, Catch::Contains("[mul_]"));
  Tensor small = from_vector<float>({1, 2, 3}, {3});
  CHECK_THROWS_WITH(small += a, Catch::Contains("[add_]") && Catch::Contains("[2, 3]"));
  Tensor bl = from_vector<bool>({true}, {1});
  CHECK_THROWS_AS(-bl, DTypeError);
  CHECK_THROWS_WITH(neg(bl), Catch::Contains("[neg]"));
  CHECK_THROWS_WITH(abs(bl), Catch::Contains("[abs]"));
  CHECK_THROWS_WITH(bl - bl, Catch::Contains("[sub]") && Catch::Contains("bool"));
  CHECK_THROWS_WITH(i - true, Catch::Contains("[sub]"));
  CHECK_THROWS_WITH(bl += 1, Catch::Contains("[add_]") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(pow(i, -1), Catch::Contains("[pow]") && Catch::Contains("negative"));
  CHECK_THROWS_WITH(pow(bl, bl), Catch::Contains("[pow]"));
  CHECK_THROWS_WITH(gelu(i), Catch::Contains("[gelu]") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(silu(i), Catch::Contains("[silu]"));
  CHECK_THROWS_WITH(gelu(a, "fast"), Catch::Contains("[gelu]") && Catch::Contains("fast"));
  CHECK_THROWS_WITH(where(a, a, a), Catch::Contains("[where]") && Catch::Contains("float32"));
  CHECK_THROWS_WITH(clamp(a, std::nullopt, std::nullopt), Catch::Contains("[clamp]"));
  CHECK_THROWS_WITH(clamp(bl, 0), Catch::Contains("[clamp]"));
  Tensor expanded = from_vector<float>({1}, {1}).expand({3});
  CHECK_THROWS_WITH(expanded += 1, Catch::Contains("[add_]") && Catch::Contains("clone"));
  CHECK_THROWS_WITH(add(Tensor(), a), Catch::Contains("[add]"));
}

TEST_CASE("half and bfloat16 round trip through ops", "[runtime][elementwise]") {
  const std::vector<float> v{0.5f, -1.25f, 3.0f, 1024.0f};
  for (DType dtype : {kFloat16, kBFloat16}) {
    const Tensor t = from_vector<float>(v, {4}).to(dtype);
    CHECK(t.to_vector<float>() == v);  // all exactly representable
    CHECK((t + t).to(kFloat32).to_vector<float>() ==
          std::vector<float>{1.0f, -2.5f, 6.0f, 2048.0f});
    CHECK((t * 1.0).dtype() == dtype);
    CHECK((t + from_vector<float>({1}, {1})).dtype() == kFloat32);
  }
  CHECK((from_vector<float>({1}, {1}).to(kFloat16) + from_vector<float>({1}, {1}).to(kBFloat16))
            .dtype() == kFloat32);
}

TEST_CASE("outputs past the streaming-store threshold are exact", "[runtime][elementwise]") {
  // 16 MiB of float32 plus an odd tail: streamed output with unaligned chunk ends.
  const int64_t n = (int64_t{16} << 20) / 4 + 13;
  for (int threads : {1, 3}) {
    const IntraOpThreadsGuard scope(threads);
    const Tensor a = filled({n}, kFloat32, -4, 4, 21);
    const Tensor b = filled({n}, kFloat32, -4, 4, 22);
    const auto av = logical_values(a), bv = logical_values(b);
    std::vector<double> sum(av.size()), scaled(av.size()), negated(av.size());
    for (size_t i = 0; i < av.size(); ++i) {
      sum[i] = av[i] + bv[i];
      scaled[i] = av[i] * 3;
      negated[i] = -av[i];
    }
    CHECK(mismatch(logical_values(a + b), sum, kFloat32) == "");
    CHECK(mismatch(logical_values(a * 3), scaled, kFloat32) == "");
    CHECK(mismatch(logical_values(-a), negated, kFloat32) == "");
    Tensor c = a.clone();
    c += b;
    CHECK(mismatch(logical_values(c), sum, kFloat32) == "");
  }
}

TEST_CASE("the CPU binary kernel divides integers without trapping", "[runtime][elementwise]") {
  // The entry points always divide in a floating dtype; the kernel itself truncates integers.
  const KernelTable& k = kernels(DeviceType::CPU, "div");
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const Tensor a = from_vector<int64_t>({7, -7, lo}, {3});
  const Tensor b = from_vector<int64_t>({-2, 2, -1}, {3});
  const Tensor out = Tensor::make_empty({3}, kInt64, Device::cpu());
  k.binary(BinaryOp::kDiv, out, a, b);
  CHECK(out.to_vector<int64_t>() == std::vector<int64_t>{-3, -3, lo});
  CHECK_THROWS_WITH(k.binary(BinaryOp::kDiv, out, a, from_vector<int64_t>({1, 0, 1}, {3})),
                    Catch::Contains("[div] integer division by zero"));
  CHECK_THROWS_AS(k.unary(UnaryOp::kExp, out, a), DTypeError);
}

// Large inputs whose last dim is strided where the output's is not are copied into the output's
// order before the op (Note [Inputs read across the grain] in kernels/cpu/elementwise.cpp): the
// results must be those of the float64 reference on every such layout, the ones that stay in
// place (a broadcast dim) too.
TEST_CASE("ops on large inputs read across the grain match a float64 reference",
          "[runtime][elementwise]") {
  // Every pair is [30, 48, 40]-shaped after its views (57600 elements, over the staging bound).
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> views = {
      {"contiguous",
       [](const Tensor& t) {
         return t.reshape({30, 48, 40});
       }},
      {"last two dims transposed",
       [](const Tensor& t) {
         return t.reshape({30, 40, 48}).transpose(1, 2);
       }},
      {"permuted",
       [](const Tensor& t) {
         return t.reshape({40, 30, 48}).permute({1, 2, 0});
       }},
      {"transposed and broadcast over the first dim",
       [](const Tensor& t) {
         return t.reshape({30, 40, 48}).select(0, 0).t().unsqueeze(0).expand({30, 48, 40});
       }},
  };
  for (const BinaryCase& c : binary_cases()) {
    if (c.op != BinaryOp::kAdd && c.op != BinaryOp::kMul && c.op != BinaryOp::kDiv &&
        c.op != BinaryOp::kMaximum && c.op != BinaryOp::kLt) {
      continue;
    }
    for (DType dtype : {kFloat32, kBFloat16, kInt64}) {
      for (const auto& [a_name, a_view] : views) {
        for (const auto& [b_name, b_view] : views) {
          INFO(op_name(c.op) << " " << dtype << ": " << a_name << " x " << b_name);
          const Tensor a = a_view(filled({57600}, dtype, c.a_lo, c.a_hi, 11));
          const Tensor b = b_view(filled({57600}, dtype, c.b_lo, c.b_hi, 12));
          check_binary(c, a, b, dtype);
        }
      }
    }
  }
  for (const UnaryCase& c : unary_cases()) {
    for (DType dtype : {kFloat32, kBFloat16}) {
      for (const auto& [name, view] : views) {
        INFO(op_name(c.op) << " " << dtype << " " << name);
        const Tensor in = view(filled({57600}, dtype, c.lo, c.hi, 13));
        std::vector<double> want = logical_values(in);
        for (double& w : want) w = c.ref(w);
        CHECK(mismatch(logical_values(c.fn(in)), want, dtype) == "");
      }
    }
  }
  // where and clamp on the same layouts.
  for (const auto& [name, view] : views) {
    INFO("where / clamp, " << name);
    const Tensor x = view(filled({57600}, kFloat32, -2, 2, 16));
    const Tensor y = view(filled({57600}, kFloat32, -2, 2, 17));
    const Tensor cond = view(filled({57600}, kFloat32, -1, 1, 18)) > 0;
    const std::vector<double> xv = logical_values(x), yv = logical_values(y),
                              cv = logical_values(cond);
    std::vector<double> want_where(xv.size()), want_clamp(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      want_where[i] = cv[i] != 0 ? xv[i] : yv[i];
      want_clamp[i] = std::clamp(xv[i], -0.5, 1.25);
    }
    CHECK(mismatch(logical_values(where(cond, x, y)), want_where, kFloat32) == "");
    CHECK(mismatch(logical_values(clamp(x, -0.5, 1.25)), want_clamp, kFloat32) == "");
  }
  // An attention head's gradient added in place into its slice of a fused qkv gradient.
  Tensor fused = filled({8, 64, 768}, kFloat32, -1, 1, 14);
  const std::vector<double> before = logical_values(fused);
  const Tensor head_grad = filled({8, 8, 32, 64}, kFloat32, -1, 1, 15)
                               .transpose(-2, -1)
                               .transpose(1, 2)
                               .reshape({8, 64, 256});
  REQUIRE(head_grad.stride(-1) != 1);  // the layout this case is about
  fused.narrow(-1, 256, 256) += head_grad;
  const std::vector<double> g = logical_values(head_grad);
  std::vector<double> want = before;
  for (size_t row = 0; row < 8 * 64; ++row) {
    for (size_t j = 0; j < 256; ++j) {
      want[row * 768 + 256 + j] = static_cast<double>(
          static_cast<float>(before[row * 768 + 256 + j]) + static_cast<float>(g[row * 256 + j]));
    }
  }
  CHECK(mismatch(logical_values(fused), want, kFloat32) == "");
}
