// The fused pointwise backward kernels (pointwise_backward, Note [Fused pointwise backward]):
// every PointwiseGradOp against a float64 reference written here from the textbook derivative, on
// every floating dtype and on contiguous, transposed, sliced, broadcast, long, 0-dim and
// zero-size operands; in float64 also against central differences of the forward op. And the
// erf / erfc ops against std::erf / std::erfc.

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/runtime/ops/elementwise_grad.h"
#include "tessera/tessera.h"

namespace tessera::runtime_test {
namespace {

using Op = PointwiseGradOp;

// Reproducible values in [lo, hi), float64.
Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  return rand(shape, kFloat64, &gen) * (hi - lo) + lo;
}

std::vector<double> values(const Tensor& t) {
  return t.to(kFloat64).contiguous().to_vector<double>();
}

// "" when got matches want within dtype's tolerance (atol, rtol), else the first mismatch.
std::string mismatch(const std::vector<double>& got, const std::vector<double>& want, DType dtype) {
  const double rtol = dtype == kFloat64   ? 1e-12
                      : dtype == kFloat32 ? 1e-5
                      : dtype == kFloat16 ? 2e-3
                                          : 8e-3;
  const double atol = dtype == kFloat64   ? 1e-12
                      : dtype == kFloat32 ? 1e-6
                      : dtype == kFloat16 ? 1e-4
                                          : 1e-3;
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i])) continue;
    std::ostringstream os;
    os << "element " << i << ": got " << got[i] << ", want " << want[i];
    return os.str();
  }
  return "";
}

double sgn(double x) { return (x > 0) - (x < 0); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

struct Case {
  Op op;
  double lo, hi;    // x's inputs (the forward's input)
  double ylo, yhi;  // y's, for two-operand ops
  double p0, p1;
  // grad * derivative from the saved operands, in float64.
  std::function<double(double g, double x, double y)> ref;
  // The forward op on float64 inputs u (and v), for central differences; `wrt` the input
  // differentiated, `saves_result`: x is the forward's result rather than u.
  std::function<Tensor(const Tensor& u, const Tensor& v)> forward;
  int wrt = 0;
  bool saves_result = false;
};

bool two_operands(Op op) {
  return op == Op::kDivOtherBackward || op == Op::kPowSelfBackward ||
         op == Op::kPowExponentBackward;
}

std::vector<Case> cases() {
  const double kSqrtPi = std::sqrt(std::numbers::pi);
  const double log_base = std::log(2.5);
  using T = const Tensor&;
  return {
      {Op::kAbsBackward, -2, 2, 0, 0, 0, 0, [](double g, double x, double) { return g * sgn(x); },
       [](T u, T) { return abs(u); }},
      {Op::kExpBackward, -3, 3, 0, 0, 0, 0, [](double g, double x, double) { return g * x; },
       [](T u, T) { return exp(u); }, 0, true},
      {Op::kLogBackward, 0.5, 3, 0, 0, 0, 0, [](double g, double x, double) { return g / x; },
       [](T u, T) { return log(u); }},
      {Op::kSqrtBackward, 0.5, 3, 0, 0, 0, 0,
       [](double g, double x, double) { return g / (2 * x); }, [](T u, T) { return sqrt(u); }, 0,
       true},
      {Op::kRsqrtBackward, 0.5, 3, 0, 0, 0, 0,
       [](double g, double x, double) { return -0.5 * g * x * x * x; },
       [](T u, T) { return rsqrt(u); }, 0, true},
      {Op::kReluBackward, -2, 2, 0, 0, 0, 0,
       [](double g, double x, double) { return x > 0 ? g : 0.0; }, [](T u, T) { return relu(u); },
       0, true},
      {Op::kGeluBackward, -5, 5, 0, 0, 0, 0,
       [kSqrtPi](double g, double x, double) {
         return g * (0.5 * std::erfc(-x / std::sqrt(2.0)) +
                     x * std::exp(-x * x / 2) / (std::sqrt(2.0) * kSqrtPi));
       },
       [](T u, T) { return gelu(u); }},
      {Op::kGeluTanhBackward, -5, 5, 0, 0, 0, 0,
       [](double g, double x, double) {
         const double k = std::sqrt(2 / std::numbers::pi);
         const double t = std::tanh(k * (x + 0.044715 * x * x * x));
         return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
       },
       [](T u, T) { return gelu(u, "tanh"); }},
      {Op::kSiluBackward, -8, 8, 0, 0, 0, 0,
       [](double g, double x, double) {
         const double s = sigmoid_ref(x);
         return g * s * (1 + x * (1 - s));
       },
       [](T u, T) { return silu(u); }},
      {Op::kTanhBackward, -3, 3, 0, 0, 0, 0,
       [](double g, double x, double) { return g * (1 - x * x); }, [](T u, T) { return tanh(u); },
       0, true},
      {Op::kSigmoidBackward, -6, 6, 0, 0, 0, 0,
       [](double g, double x, double) { return g * x * (1 - x); },
       [](T u, T) { return sigmoid(u); }, 0, true},
      {Op::kErfBackward, -3, 3, 0, 0, 0, 0,
       [kSqrtPi](double g, double x, double) { return g * 2 / kSqrtPi * std::exp(-x * x); },
       [](T u, T) { return erf(u); }},
      {Op::kErfcBackward, -3, 3, 0, 0, 0, 0,
       [kSqrtPi](double g, double x, double) { return -g * 2 / kSqrtPi * std::exp(-x * x); },
       [](T u, T) { return erfc(u); }},
      // Bounds exact in every floating dtype.
      {Op::kClampBackward, -2, 2, 0, 0, -0.5, 0.75,
       [](double g, double x, double) { return x >= -0.5 && x <= 0.75 ? g : 0.0; },
       [](T u, T) { return clamp(u, -0.5, 0.75); }},
      {Op::kPowScalarBackward, 0.5, 2, 0, 0, 2.5, 0,
       [](double g, double x, double) { return g * 2.5 * std::pow(x, 1.5); },
       [](T u, T) { return pow(u, 2.5); }},
      {Op::kRdivBackward, 0.5, 2, 0, 0, 1.5, 0,
       [](double g, double x, double) { return -g * 1.5 / (x * x); },
       [](T u, T) { return 1.5 / u; }},
      {Op::kRpowBackward, -2, 2, 0, 0, log_base, 0,
       [log_base](double g, double x, double) { return g * x * log_base; },
       [](T u, T) { return detail::binary_scalar(BinaryOp::kPow, u, 2.5, true); }, 0, true},
      {Op::kDivOtherBackward, -2, 2, 0.5, 2, 0, 0,
       [](double g, double x, double y) { return -g * x / (y * y); },
       [](T u, T v) { return u / v; }, 1},
      {Op::kPowSelfBackward, 0.5, 2, -2, 2, 0, 0,
       [](double g, double x, double y) { return g * y * std::pow(x, y - 1); },
       [](T u, T v) { return pow(u, v); }, 0},
      {Op::kPowExponentBackward, 0.5, 2, -2, 2, 0, 0,
       [](double g, double x, double y) { return g * std::pow(x, y) * std::log(x); },
       [](T u, T v) { return pow(u, v); }, 1},
  };
}

// The saved operands of a case for forward inputs u (and v).
struct Operands {
  Tensor x, y;
};
Operands saved(const Case& c, const Tensor& u, const Tensor& v) {
  if (two_operands(c.op)) return {u, v};
  return {c.saves_result ? c.forward(u, v) : u, Tensor()};
}

// pointwise_backward against the float64 reference from the operands as the kernel sees them
// (rounded to dtype).
void check_against_reference(const Case& c, const Tensor& grad, const Tensor& x, const Tensor& y) {
  const Tensor out = pointwise_backward(c.op, grad, x, y, c.p0, c.p1);
  Shape shape = broadcast_shapes(grad.sizes(), x.sizes(), "test");
  if (y.defined()) shape = broadcast_shapes(shape, y.sizes(), "test");
  REQUIRE(out.sizes() == shape);
  CHECK(out.dtype() == grad.dtype());
  const std::vector<double> g = values(grad.expand(shape));
  const std::vector<double> xv = values(x.expand(shape));
  const std::vector<double> yv = y.defined() ? values(y.expand(shape)) : std::vector<double>();
  std::vector<double> want(g.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = c.ref(g[i], xv[i], y.defined() ? yv[i] : 0.0);
  CHECK(mismatch(values(out), want, out.dtype()) == "");
}

}  // namespace

TEST_CASE("fused pointwise backward kernels match a float64 reference on every dtype and layout",
          "[runtime][pointwise_backward]") {
  for (const Case& c : cases()) {
    const bool two = two_operands(c.op);
    for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
      INFO(op_name(c.op) << " " << dtype);
      // Inputs drawn in float64, rounded to dtype, then the saved operands computed from those.
      const auto inputs = [&](const Shape& shape, uint64_t seed) {
        const Tensor u = uniform(shape, c.lo, c.hi, seed).to(dtype);
        const Tensor v = two ? uniform(shape, c.ylo, c.yhi, seed + 1).to(dtype) : Tensor();
        return saved(c, u, v);
      };
      const auto grad_of = [&](const Shape& shape, uint64_t seed) {
        return uniform(shape, -2, 2, seed).to(dtype);
      };
      {
        INFO("contiguous");
        const Operands o = inputs({3, 4}, 1);
        check_against_reference(c, grad_of({3, 4}, 2), o.x, o.y);
      }
      {
        INFO("transposed");
        const Operands o = inputs({4, 3}, 3);
        check_against_reference(c, grad_of({4, 3}, 4).t(), o.x.t(), two ? o.y.t() : Tensor());
      }
      {
        // Large enough that the kernel copies the transposed operands first (Note [Inputs read
        // across the grain] in kernels/cpu/elementwise.cpp); grad contiguous, then transposed too.
        INFO("transposed, 7680 elements");
        const Operands o = inputs({96, 80}, 16);
        const Tensor xt = o.x.t(), yt = two ? o.y.t() : Tensor();
        check_against_reference(c, grad_of({80, 96}, 17), xt, yt);
        check_against_reference(c, grad_of({96, 80}, 18).t(), xt, yt);
      }
      {
        INFO("sliced");
        const Operands o = inputs({3, 8}, 5);
        const auto sl = [](const Tensor& t) { return t.defined() ? t.slice(1, 0, 8, 2) : t; };
        check_against_reference(c, sl(grad_of({3, 8}, 6)), sl(o.x), sl(o.y));
      }
      {
        INFO("broadcast grad (as from sum) and y");
        const Operands o = inputs({3, 4}, 7);
        const Tensor y = two ? inputs({4}, 8).y : Tensor();
        check_against_reference(c, grad_of({}, 9).expand({3, 4}), o.x, y);
      }
      {
        INFO("long: vector body, tail and several op-math blocks");
        const Operands o = inputs({1000}, 10);
        check_against_reference(c, grad_of({1000}, 11), o.x, o.y);
      }
      {
        INFO("0-dim and zero-size");
        const Operands s = inputs({}, 12);
        check_against_reference(c, grad_of({}, 13), s.x, s.y);
        const Operands e = inputs({0, 4}, 14);
        check_against_reference(c, grad_of({0, 4}, 15), e.x, e.y);
      }
    }
  }
}

TEST_CASE("fused pointwise backward kernels match central differences of the forward op",
          "[runtime][pointwise_backward]") {
  constexpr double kH = 1e-6;
  for (const Case& c : cases()) {
    INFO(op_name(c.op));
    const Tensor u = uniform({64}, c.lo, c.hi, 21);
    const Tensor v = two_operands(c.op) ? uniform({64}, c.ylo, c.yhi, 22) : Tensor();
    const Tensor g = uniform({64}, -2, 2, 23);
    // Pointwise: perturbing every element at once gives every element's derivative.
    const Tensor numeric = c.wrt == 0 ? (c.forward(u + kH, v) - c.forward(u - kH, v)) / (2 * kH)
                                      : (c.forward(u, v + kH) - c.forward(u, v - kH)) / (2 * kH);
    const Operands o = saved(c, u, v);
    const Tensor fused = pointwise_backward(c.op, g, o.x, o.y, c.p0, c.p1);
    CHECK(allclose(fused, g * numeric, 1e-6, 1e-7));
  }
}

TEST_CASE("fused pointwise backward: dtype promotion and errors", "[runtime][pointwise_backward]") {
  const Tensor x32 = uniform({4}, -1, 1, 31).to(kFloat32);
  const Tensor g64 = uniform({4}, -1, 1, 32);
  CHECK(pointwise_backward(Op::kTanhBackward, g64, x32).dtype() == kFloat64);
  CHECK_THROWS_AS(pointwise_backward(Op::kTanhBackward, g64, uniform({3}, -1, 1, 33)), ShapeError);
  CHECK_THROWS_WITH(pointwise_backward(Op::kDivOtherBackward, g64, g64),
                    Catch::Contains("[div_other_backward]"));
  CHECK_THROWS_WITH(pointwise_backward(Op::kExpBackward, g64, g64, g64),
                    Catch::Contains("[exp_backward]"));
  const Tensor i = from_vector(std::vector<int64_t>{1, 2}, Shape{2});
  CHECK_THROWS_AS(pointwise_backward(Op::kExpBackward, i, i), DTypeError);
}

TEST_CASE("erf and erfc match std::erf and std::erfc", "[runtime][elementwise]") {
  for (DType dtype : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    INFO(dtype);
    // Long enough for Eigen's packets and a tail; erfc far into its right tail, where 1 - erf
    // would lose every digit.
    const Tensor x = uniform({1001}, -4, 4, 41).to(dtype);
    const Tensor xt = x.narrow(0, 0, 1000).view({40, 25}).t();
    const Tensor tail = uniform({17}, 4, 9, 42).to(dtype);
    const auto ref = [](const Tensor& t, double (*f)(double)) {
      std::vector<double> v = values(t);
      for (double& e : v) e = f(e);
      return v;
    };
    const auto std_erf = [](double v) { return std::erf(v); };
    const auto std_erfc = [](double v) { return std::erfc(v); };
    CHECK(erf(x).dtype() == dtype);
    CHECK(mismatch(values(erf(x)), ref(x, std_erf), dtype) == "");
    CHECK(mismatch(values(x.erfc()), ref(x, std_erfc), dtype) == "");
    CHECK(mismatch(values(xt.erf()), ref(xt, std_erf), dtype) == "");
    CHECK(mismatch(values(erfc(xt)), ref(xt, std_erfc), dtype) == "");
    if (dtype == kFloat64 || dtype == kFloat32) {
      // The half types cannot hold erfc(9) ~ 4e-37; float32 and float64 keep its relative accuracy.
      const std::vector<double> got = values(erfc(tail));
      const std::vector<double> want_tail = ref(tail, std_erfc);
      for (size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i] == Approx(want_tail[i]).epsilon(dtype == kFloat64 ? 1e-13 : 1e-5));
      }
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor s = from_vector<double>({0.0, inf, -inf, std::nan("")}, {4});
  const std::vector<double> e = erf(s).to_vector<double>();
  const std::vector<double> ec = erfc(s.to(kFloat32)).to(kFloat64).to_vector<double>();
  CHECK(e[0] == 0.0);
  CHECK(e[1] == 1.0);
  CHECK(e[2] == -1.0);
  CHECK(std::isnan(e[3]));
  CHECK(ec[1] == 0.0);
  CHECK(ec[2] == 2.0);
  CHECK(std::isnan(ec[3]));
  // Integral inputs give float32, as torch.erf.
  CHECK(erf(from_vector(std::vector<int64_t>{0, 1}, Shape{2})).dtype() == kFloat32);
}

}  // namespace tessera::runtime_test
