// Every CPU ISA variant of the vectorized kernel families (Note [CPU ISA variants] in
// kernels/cpu_isa.cpp) against float64 references computed here with <cmath>, never with another
// Tessera variant: unary, binary and fused backward pointwise ops, reductions, softmax /
// log_softmax, layer_norm / rms_norm; float32 and float64; contiguous and strided; lengths around
// the packet widths (4, 8, 16 floats) and their tails; special values. A variant that this build
// or CPU lacks is reported as skipped with the reason set_cpu_isa gives.

#include "tessera/runtime/cpu_isa.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops/elementwise_grad.h"
#include "tessera/tessera.h"

namespace tessera::runtime_test {
namespace {

constexpr CpuIsa kAllIsas[] = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512};
// Not multiples of 16: every vector body also runs its tail.
constexpr int64_t kLengths[] = {1, 7, 33, 1000, 4099};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Restores the variant that was active when it was made.
class IsaGuard {
 public:
  IsaGuard() : saved_(active_cpu_isa()) {}
  ~IsaGuard() { set_cpu_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  CpuIsa saved_;
};

// Prints, once per process, which variants run and why the others are skipped.
void report_variants() {
  static const bool reported = [] {
    const char* env = std::getenv("TESSERA_CPU_ISA");
    std::printf("[isa] CPU ISA variant installed at startup: %s (TESSERA_CPU_ISA %s)\n",
                to_string(active_cpu_isa()), env != nullptr ? env : "unset");
    const IsaGuard guard;
    for (CpuIsa isa : kAllIsas) {
      try {
        set_cpu_isa(isa);
        std::printf("[isa] CPU ISA variant %s: tested\n", to_string(isa));
      } catch (const Error& e) {
        std::printf("[isa] CPU ISA variant %s: skipped: %s\n", to_string(isa), e.what());
      }
    }
    return true;
  }();
  (void)reported;
}

// Runs f() under every variant this build and CPU can run.
template <typename F>
void for_each_isa(const F& f) {
  report_variants();
  const IsaGuard guard;
  for (CpuIsa isa : compiled_cpu_isas()) {
    set_cpu_isa(isa);
    INFO("CPU ISA variant " << to_string(isa));
    f();
  }
}

// Tolerances, relative to the reference (or to the scale a reduction accumulates) plus absolute.
// float32: results are rounded to float (2^-24 relative) after Eigen's approximations of exp,
// log, tanh, erf (a few ulp) and, on AVX / AVX-512, rsqrt estimates refined by a Newton step (two
// ulp): 1e-5 leaves ~100 ulp of margin, the bound tests/runtime/elementwise_test.cpp holds the
// baseline to. atol 1e-6 absorbs results that underflow in float but not in float64 (silu and
// gelu far in the negative tail). float64: Eigen's double exp and log are within 2 ulp (4e-16);
// 1e-12 leaves room for the formulas that compose several of them (sigmoid, silu, gelu).
struct Tol {
  double rtol, atol;
};
Tol tol(DType dtype) { return dtype == kFloat64 ? Tol{1e-12, 1e-12} : Tol{1e-5, 1e-6}; }

// The exact results rounded to the output dtype, as a correctly rounded kernel would give them
// (exp(100) is inf in float32).
std::vector<double> rounded(std::vector<double> v, DType dtype) {
  if (dtype == kFloat32) {
    for (double& x : v) x = static_cast<float>(x);
  }
  return v;
}

std::vector<double> values(const Tensor& t) {
  return t.to(kFloat64).contiguous().to_vector<double>();
}

// "" when got matches want (NaN where want is NaN, infinities exactly), else the first mismatch.
std::string mismatch(const std::vector<double>& got, const std::vector<double>& want, Tol t,
                     const std::vector<double>& scale = {}) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::abs(g - w) <= t.atol + t.rtol * (scale.empty() ? std::abs(w) : scale[i]);
    }
    if (!ok) {
      std::ostringstream os;
      os.precision(17);
      os << "element " << i << " of " << got.size() << ": got " << g << ", want " << w;
      return os.str();
    }
  }
  return "";
}

// n reproducible values in [lo, hi) (std::mt19937_64, not Tessera's generator).
std::vector<double> uniform(int64_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

// Special values spread over v (every 3rd element from the start, cycling through the list).
std::vector<double> with_specials(std::vector<double> v) {
  const double specials[] = {kNaN,  kInf,  -kInf, 0.0,   -0.0,  -1000.0, -100.0,
                             -88.0, -50.0, 50.0,  100.0, 1e-30, -1e-30,  1000.0};
  size_t k = 0;
  for (size_t i = 0; i < v.size(); i += 3) v[i] = specials[k++ % std::size(specials)];
  return v;
}

// v as a 1-D tensor of dtype: contiguous, or every other element of a buffer twice as long.
Tensor vector_tensor(const std::vector<double>& v, DType dtype, bool strided) {
  const auto n = static_cast<int64_t>(v.size());
  if (!strided) return from_vector<double>(v, {n}).to(dtype);
  std::vector<double> buf(2 * v.size(), -7.0);
  for (size_t i = 0; i < v.size(); ++i) buf[2 * i] = v[i];
  return from_vector<double>(buf, {2 * n}).to(dtype).slice(0, 0, 2 * n, 2);
}

// v (rows x n, row-major) as a [rows, n] tensor of dtype: contiguous, or the transpose of a
// contiguous [n, rows] tensor (the reduced / normalized dim then has stride rows).
Tensor matrix_tensor(const std::vector<double>& v, int64_t rows, int64_t n, DType dtype,
                     bool strided) {
  if (!strided) return from_vector<double>(v, {rows, n}).to(dtype);
  std::vector<double> w(v.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j)
      w[static_cast<size_t>(j * rows + i)] = v[static_cast<size_t>(i * n + j)];
  }
  return from_vector<double>(w, {n, rows}).to(dtype).t();
}

// ---- pointwise ----

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2)); }
double gelu_tanh_ref(double x) {
  const double k = std::sqrt(2 / std::numbers::pi);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  double lo, hi;  // the finite inputs
};

std::vector<UnaryCase> unary_cases() {
  using T = const Tensor&;
  return {
      {"exp", [](T x) { return exp(x); }, [](double x) { return std::exp(x); }, -80, 80},
      {"log", [](T x) { return log(x); }, [](double x) { return std::log(x); }, 1e-3, 1e3},
      {"sqrt", [](T x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 1e3},
      {"rsqrt", [](T x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 1e-3, 1e3},
      {"tanh", [](T x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -10, 10},
      {"sigmoid", [](T x) { return sigmoid(x); }, sigmoid_ref, -30, 30},
      {"silu", [](T x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, -30, 30},
      {"gelu", [](T x) { return gelu(x); }, gelu_ref, -8, 8},
      {"gelu_tanh", [](T x) { return gelu(x, "tanh"); }, gelu_tanh_ref, -8, 8},
      {"erf", [](T x) { return erf(x); }, [](double x) { return std::erf(x); }, -4, 4},
      {"erfc", [](T x) { return erfc(x); }, [](double x) { return std::erfc(x); }, -4, 4},
      {"abs", [](T x) { return abs(x); }, [](double x) { return std::abs(x); }, -5, 5},
      {"neg", [](T x) { return -x; }, [](double x) { return -x; }, -5, 5},
      {"relu", [](T x) { return relu(x); },
       [](double x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0); }, -5, 5},
  };
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<double(double, double)> ref;
  double lo, hi, ylo, yhi;
};

double nan_max(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
}
double nan_min(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
}

std::vector<BinaryCase> binary_cases() {
  using T = const Tensor&;
  return {
      {"add", [](T a, T b) { return a + b; }, [](double a, double b) { return a + b; }, -5, 5, -5,
       5},
      {"sub", [](T a, T b) { return a - b; }, [](double a, double b) { return a - b; }, -5, 5, -5,
       5},
      {"mul", [](T a, T b) { return a * b; }, [](double a, double b) { return a * b; }, -5, 5, -5,
       5},
      {"div", [](T a, T b) { return a / b; }, [](double a, double b) { return a / b; }, -5, 5, 0.5,
       4},
      {"pow", [](T a, T b) { return pow(a, b); }, [](double a, double b) { return std::pow(a, b); },
       0.5, 3, -3, 3},
      {"maximum", [](T a, T b) { return maximum(a, b); }, nan_max, -5, 5, -5, 5},
      {"minimum", [](T a, T b) { return minimum(a, b); }, nan_min, -5, 5, -5, 5},
  };
}

using GradOp = PointwiseGradOp;

struct GradCase {
  GradOp op;
  double lo, hi, ylo, yhi;
  std::function<double(double g, double x, double y)> ref;  // textbook derivative, float64
};

// The ops with a vectorized (Eigen) backward, and a few that take GradFn's scalar loop.
std::vector<GradCase> grad_cases() {
  const double two_over_sqrt_pi = 2 / std::sqrt(std::numbers::pi);
  return {
      {GradOp::kGeluBackward, -6, 6, 0, 0,
       [](double g, double x, double) {
         return g * (0.5 * std::erfc(-x / std::numbers::sqrt2) +
                     x * std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi));
       }},
      {GradOp::kGeluTanhBackward, -6, 6, 0, 0,
       [](double g, double x, double) {
         const double k = std::sqrt(2 / std::numbers::pi);
         const double t = std::tanh(k * (x + 0.044715 * x * x * x));
         return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
       }},
      {GradOp::kSiluBackward, -20, 20, 0, 0,
       [](double g, double x, double) {
         const double s = sigmoid_ref(x);
         return g * s * (1 + x * (1 - s));
       }},
      {GradOp::kErfBackward, -4, 4, 0, 0,
       [two_over_sqrt_pi](double g, double x, double) {
         return g * two_over_sqrt_pi * std::exp(-x * x);
       }},
      {GradOp::kErfcBackward, -4, 4, 0, 0,
       [two_over_sqrt_pi](double g, double x, double) {
         return -g * two_over_sqrt_pi * std::exp(-x * x);
       }},
      {GradOp::kTanhBackward, -1, 1, 0, 0,
       [](double g, double x, double) { return g * (1 - x * x); }},
      {GradOp::kSigmoidBackward, 0, 1, 0, 0,
       [](double g, double x, double) { return g * x * (1 - x); }},
      {GradOp::kExpBackward, -5, 5, 0, 0, [](double g, double x, double) { return g * x; }},
      {GradOp::kLogBackward, 0.5, 3, 0, 0, [](double g, double x, double) { return g / x; }},
      {GradOp::kDivOtherBackward, -2, 2, 0.5, 2,
       [](double g, double x, double y) { return -g * x / (y * y); }},
      {GradOp::kPowSelfBackward, 0.5, 2, -2, 2,
       [](double g, double x, double y) { return g * y * std::pow(x, y - 1); }},
  };
}

// ---- rows: reductions, softmax, norms ----

constexpr int64_t kRows = 3;

std::vector<double> row(const std::vector<double>& v, int64_t n, int64_t i) {
  return {v.begin() + i * n, v.begin() + (i + 1) * n};
}

// The softmax tests' logits: kRows x n values in [-20, 20), every other element of row 1 masked
// with -inf.
std::vector<double> masked_logits(int64_t n) {
  std::vector<double> v = uniform(kRows * n, -20, 20, static_cast<uint64_t>(n));
  for (int64_t j = 1; j < n; j += 2) v[static_cast<size_t>(n + j)] = -kInf;
  return v;
}

// A row's max and sum of exp(e - max), from which its softmax and log_softmax follow.
struct RowSoftmax {
  double max = -kInf, sum = 0;
  explicit RowSoftmax(const std::vector<double>& r) {
    for (double e : r) max = std::max(max, e);
    for (double e : r) sum += std::exp(e - max);
  }
  double probability(double e) const { return std::exp(e - max) / sum; }
};

}  // namespace

TEST_CASE("unary ops of every CPU ISA variant match a float64 reference", "[runtime][isa]") {
  for_each_isa([] {
    for (const UnaryCase& c : unary_cases()) {
      for (DType dtype : {kFloat32, kFloat64}) {
        for (int64_t n : kLengths) {
          for (bool strided : {false, true}) {
            for (bool specials : {false, true}) {
              INFO(c.name << " " << dtype << " n=" << n << (strided ? " strided" : " contiguous")
                          << (specials ? " with special values" : ""));
              std::vector<double> v = uniform(n, c.lo, c.hi, static_cast<uint64_t>(n));
              if (specials) v = with_specials(std::move(v));
              const Tensor x = vector_tensor(v, dtype, strided);
              const Tensor y = c.fn(x);
              REQUIRE(y.dtype() == dtype);
              std::vector<double> want = values(x);
              for (double& w : want) w = c.ref(w);
              CHECK(mismatch(values(y), rounded(want, dtype), tol(dtype)) == "");
            }
          }
        }
      }
    }
  });
}

TEST_CASE("binary ops of every CPU ISA variant match a float64 reference", "[runtime][isa]") {
  for_each_isa([] {
    for (const BinaryCase& c : binary_cases()) {
      for (DType dtype : {kFloat32, kFloat64}) {
        for (int64_t n : kLengths) {
          for (int layout = 0; layout < 3; ++layout) {
            const char* layouts[] = {"contiguous", "strided", "scalar b"};
            INFO(c.name << " " << dtype << " n=" << n << " " << layouts[layout]);
            std::vector<double> av = uniform(n, c.lo, c.hi, static_cast<uint64_t>(n));
            if (c.name == std::string("add") || c.name == std::string("maximum")) {
              av = with_specials(std::move(av));
            }
            const Tensor a = vector_tensor(av, dtype, layout == 1);
            const Tensor b =
                layout == 2 ? vector_tensor(uniform(1, c.ylo, c.yhi, 99), dtype, false)
                                  .reshape({})
                                  .expand({n})
                            : vector_tensor(uniform(n, c.ylo, c.yhi, static_cast<uint64_t>(n + 1)),
                                            dtype, layout == 1);
            const Tensor out = c.fn(a, b);
            REQUIRE(out.dtype() == dtype);
            const std::vector<double> x = values(a), y = values(b);
            std::vector<double> want(x.size());
            for (size_t i = 0; i < want.size(); ++i) want[i] = c.ref(x[i], y[i]);
            CHECK(mismatch(values(out), rounded(want, dtype), tol(dtype)) == "");
          }
        }
      }
    }
  });
}

TEST_CASE("fused pointwise backward kernels of every CPU ISA variant match a float64 reference",
          "[runtime][isa]") {
  for_each_isa([] {
    for (const GradCase& c : grad_cases()) {
      const bool two = c.op == GradOp::kDivOtherBackward || c.op == GradOp::kPowSelfBackward;
      for (DType dtype : {kFloat32, kFloat64}) {
        for (int64_t n : kLengths) {
          for (bool strided : {false, true}) {
            INFO(op_name(c.op) << " " << dtype << " n=" << n
                               << (strided ? " strided" : " contiguous"));
            const auto seed = static_cast<uint64_t>(n);
            const Tensor g = vector_tensor(uniform(n, -2, 2, seed), dtype, strided);
            const Tensor x = vector_tensor(uniform(n, c.lo, c.hi, seed + 1), dtype, strided);
            const Tensor y =
                two ? vector_tensor(uniform(n, c.ylo, c.yhi, seed + 2), dtype, strided) : Tensor();
            const Tensor out = pointwise_backward(c.op, g, x, y);
            const std::vector<double> gv = values(g), xv = values(x);
            const std::vector<double> yv = two ? values(y) : std::vector<double>(gv.size());
            std::vector<double> want(gv.size());
            for (size_t i = 0; i < want.size(); ++i) want[i] = c.ref(gv[i], xv[i], yv[i]);
            CHECK(mismatch(values(out), rounded(want, dtype), tol(dtype)) == "");
          }
        }
      }
    }
  });
}

// Sums are compared relative to the sum of the magnitudes they accumulate: the cascade of Note
// [Reduction loops] keeps the error near log2(n) eps sum|x|, far inside 1e-5 (float) and 1e-12
// (double) of it at n = 4099. A product of n factors may lose n eps relative: prod's bound is
// that, times 4.
TEST_CASE("reductions of every CPU ISA variant match a float64 reference", "[runtime][isa]") {
  for_each_isa([] {
    for (DType dtype : {kFloat32, kFloat64}) {
      const double eps = dtype == kFloat64 ? 0x1p-52 : 0x1p-23;
      for (int64_t n : kLengths) {
        for (bool strided : {false, true}) {
          for (bool with_nan : {false, true}) {
            INFO(dtype << " n=" << n << (strided ? " strided" : " contiguous")
                       << (with_nan ? " with a NaN" : ""));
            std::vector<double> v = uniform(kRows * n, -1, 1, static_cast<uint64_t>(n));
            if (with_nan) v[static_cast<size_t>(n + n / 2)] = kNaN;  // row 1
            const Tensor x = matrix_tensor(v, kRows, n, dtype, strided);
            const std::vector<double> xv = values(x);
            // Per row: reference value and the scale its error is relative to.
            const auto check = [&](const char* what, const Tensor& got,
                                   const std::function<double(const std::vector<double>&)>& ref,
                                   const std::function<double(const std::vector<double>&)>& scale,
                                   Tol t) {
              INFO(what);
              std::vector<double> want, sc;
              for (int64_t i = 0; i < kRows; ++i) {
                want.push_back(ref(row(xv, n, i)));
                sc.push_back(scale(row(xv, n, i)));
              }
              CHECK(mismatch(values(got), want, t, sc) == "");
            };
            const auto sum_abs = [](const std::vector<double>& r) {
              double s = 0;
              for (double e : r) s += std::abs(e);
              return s;
            };
            const auto sum_ref = [](const std::vector<double>& r) {
              double s = 0;
              for (double e : r) s += e;
              return s;
            };
            const auto mean_ref = [&](const std::vector<double>& r) {
              return sum_ref(r) / static_cast<double>(r.size());
            };
            const auto var_ref = [&](const std::vector<double>& r) {
              const double m = mean_ref(r);
              double s = 0;
              for (double e : r) s += (e - m) * (e - m);
              return s / static_cast<double>(r.size() - 1);  // n = 1: 0 / 0
            };
            const auto var_scale = [](const std::vector<double>& r) {
              double s = 0;
              for (double e : r) s += e * e;
              return r.size() > 1 ? s / static_cast<double>(r.size() - 1) : 0.0;
            };
            const auto extreme = [](bool max) {
              return [max](const std::vector<double>& r) {
                double m = r[0];
                for (double e : r) {
                  if (std::isnan(e)) return kNaN;
                  m = max ? std::max(m, e) : std::min(m, e);
                }
                return m;
              };
            };
            const auto arg_extreme = [](bool max) {
              return [max](const std::vector<double>& r) {
                size_t best = 0;
                for (size_t i = 0; i < r.size(); ++i) {
                  if (std::isnan(r[i])) return static_cast<double>(i);
                  if (max ? r[i] > r[best] : r[i] < r[best]) best = i;
                }
                return static_cast<double>(best);
              };
            };
            const auto zero = [](const std::vector<double>&) { return 0.0; };
            const Tol exact{0, 0};
            const Tol acc = tol(dtype);

            check("sum", sum(x, {1}), sum_ref, sum_abs, acc);
            check(
                "mean", mean(x, {1}), mean_ref,
                [&](const std::vector<double>& r) {
                  return sum_abs(r) / static_cast<double>(r.size());
                },
                acc);
            check("amax", amax(x, {1}), extreme(true), zero, exact);
            check("amin", amin(x, {1}), extreme(false), zero, exact);
            check("argmax", argmax(x, 1), arg_extreme(true), zero, exact);
            check("argmin", argmin(x, 1), arg_extreme(false), zero, exact);
            check("var", var(x, {1}), var_ref, var_scale, acc);
            check(
                "norm 2", norm(x, 2.0, {1}),
                [](const std::vector<double>& r) {
                  double s = 0;
                  for (double e : r) s += e * e;
                  return std::sqrt(s);
                },
                [](const std::vector<double>& r) {
                  double s = 0;
                  for (double e : r) s += e * e;
                  return std::sqrt(s);
                },
                acc);
            check("norm 1", norm(x, 1.0, {1}), sum_abs, sum_abs, acc);
            check(
                "norm inf", norm(x, kInf, {1}),
                [](const std::vector<double>& r) {
                  double m = 0;
                  for (double e : r) {
                    if (std::isnan(e)) return kNaN;
                    m = std::max(m, std::abs(e));
                  }
                  return m;
                },
                zero, exact);
            // Factors in [0.9, 1.1] keep the product of 4099 of them in range.
            const Tensor f = x * 0.1 + 1.0;
            const std::vector<double> fv = values(f);
            std::vector<double> pwant, pscale;
            for (int64_t i = 0; i < kRows; ++i) {
              double p = 1;
              for (double e : row(fv, n, i)) p *= e;
              pwant.push_back(p);
              pscale.push_back(std::abs(p) * 4 * static_cast<double>(n) * eps);
            }
            INFO("prod");
            CHECK(mismatch(values(prod(f, {1})), pwant, Tol{1, 0}, pscale) == "");
          }
        }
      }
    }
  });
}

// Reductions over the outer dim and over every dim take other loops (Note [Reduction loops]).
TEST_CASE("outer and full reductions of every CPU ISA variant match a float64 reference",
          "[runtime][isa]") {
  for_each_isa([] {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (int64_t n : kLengths) {
        INFO(dtype << " n=" << n);
        const std::vector<double> v = uniform(kRows * n, -1, 1, static_cast<uint64_t>(n));
        const Tensor x = matrix_tensor(v, kRows, n, dtype, false);
        const std::vector<double> xv = values(x);
        std::vector<double> col(static_cast<size_t>(n), 0.0), col_abs(static_cast<size_t>(n), 0.0),
            col_max(static_cast<size_t>(n), -kInf);
        double total = 0, total_abs = 0;
        for (int64_t i = 0; i < kRows; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const double e = xv[static_cast<size_t>(i * n + j)];
            col[static_cast<size_t>(j)] += e;
            col_abs[static_cast<size_t>(j)] += std::abs(e);
            col_max[static_cast<size_t>(j)] = std::max(col_max[static_cast<size_t>(j)], e);
            total += e;
            total_abs += std::abs(e);
          }
        }
        CHECK(mismatch(values(sum(x, {0})), col, tol(dtype), col_abs) == "");
        CHECK(mismatch(values(amax(x, {0})), col_max, Tol{0, 0}) == "");
        CHECK(mismatch(values(sum(x)), {total}, tol(dtype), {total_abs}) == "");
      }
    }
  });
}

// Along dim 1 of [3, n]: contiguous rows (the row kernel) and rows of stride 3 (the lanes kernel,
// vectorized across rows). Row 1 masks every other element with -inf. Values are O(1), so
// log_softmax's absolute error is that of log(sum), ~eps: atol covers it.
TEST_CASE("softmax and log_softmax of every CPU ISA variant match a float64 reference",
          "[runtime][isa]") {
  for_each_isa([] {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (int64_t n : kLengths) {
        for (bool strided : {false, true}) {
          INFO(dtype << " n=" << n << (strided ? " strided" : " contiguous"));
          const Tensor x = matrix_tensor(masked_logits(n), kRows, n, dtype, strided);
          const std::vector<double> xv = values(x);
          std::vector<double> want_sm, want_lsm;
          for (int64_t i = 0; i < kRows; ++i) {
            const std::vector<double> r = row(xv, n, i);
            const RowSoftmax rs(r);
            for (double e : r) {
              want_sm.push_back(rs.probability(e));
              want_lsm.push_back((e - rs.max) - std::log(rs.sum));
            }
          }
          const Tol t = tol(dtype);
          CHECK(mismatch(values(softmax(x, 1)), want_sm, t) == "");
          CHECK(mismatch(values(log_softmax(x, 1)), want_lsm, Tol{t.rtol, 10 * t.atol}) == "");
        }
      }
    }
  });
}

// Their gradients (the one-pass backward kernels, reached through autograd) for an incoming
// gradient g in [-1, 1): softmax's y (g - sum(g y)) and log_softmax's g - softmax sum(g), on the
// same rows, masked ones included. log_softmax's sum(g) grows with n, hence its atol.
TEST_CASE("softmax and log_softmax gradients of every CPU ISA variant match a float64 reference",
          "[runtime][isa]") {
  for_each_isa([] {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (int64_t n : kLengths) {
        for (bool strided : {false, true}) {
          INFO(dtype << " n=" << n << (strided ? " strided" : " contiguous"));
          const std::vector<double> gv = uniform(kRows * n, -1, 1, static_cast<uint64_t>(n + 1));
          const Tensor x =
              matrix_tensor(masked_logits(n), kRows, n, dtype, strided).requires_grad_();
          const Tensor g = matrix_tensor(gv, kRows, n, dtype, false);
          const std::vector<double> xv = values(x.detach());
          std::vector<double> want_sm, want_lsm;
          for (int64_t i = 0; i < kRows; ++i) {
            const std::vector<double> r = row(xv, n, i), gr = row(gv, n, i);
            const RowSoftmax rs(r);
            double gy = 0, gsum = 0;
            for (int64_t j = 0; j < n; ++j) {
              gy += gr[static_cast<size_t>(j)] * rs.probability(r[static_cast<size_t>(j)]);
              gsum += gr[static_cast<size_t>(j)];
            }
            for (int64_t j = 0; j < n; ++j) {
              const double y = rs.probability(r[static_cast<size_t>(j)]);
              want_sm.push_back(y * (gr[static_cast<size_t>(j)] - gy));
              want_lsm.push_back(gr[static_cast<size_t>(j)] - y * gsum);
            }
          }
          const Tol t = tol(dtype);
          const Tensor got_sm = autograd::grad({softmax(x, 1)}, {x}, {g})[0];
          const Tensor got_lsm = autograd::grad({log_softmax(x, 1)}, {x}, {g})[0];
          CHECK(mismatch(values(got_sm), want_sm, t) == "");
          CHECK(mismatch(values(got_lsm), want_lsm, Tol{t.rtol, 10 * t.atol}) == "");
        }
      }
    }
  });
}

// cross_entropy over n classes (its forward's log_softmax rows and its one-pass backward kernel),
// with and without label smoothing: loss = mean over rows of -sum_j q_j log p_j and gradient
// (p - q) / rows, q = (1 - s) at the target plus s / n everywhere. Row 1 masks every other class
// with -inf (its target is one the mask keeps).
TEST_CASE("cross_entropy of every CPU ISA variant matches a float64 reference", "[runtime][isa]") {
  for_each_isa([] {
    for (DType dtype : {kFloat32, kFloat64}) {
      for (int64_t n : kLengths) {
        for (double smoothing : {0.0, 0.1}) {
          INFO(dtype << " n=" << n << " label_smoothing=" << smoothing);
          std::vector<double> xv = masked_logits(n);
          // With every other class masked, smoothing puts weight on -inf log-probabilities.
          if (smoothing > 0) xv = uniform(kRows * n, -20, 20, static_cast<uint64_t>(n + 2));
          std::vector<int64_t> targets;
          for (int64_t i = 0; i < kRows; ++i) targets.push_back((i * 5 + 2) % n / 2 * 2);
          const Tensor x = matrix_tensor(xv, kRows, n, dtype, false).requires_grad_();
          const Tensor target = from_vector<int64_t>(targets, {kRows});
          const std::vector<double> rounded_x = values(x.detach());
          double want_loss = 0;
          std::vector<double> want_grad;
          for (int64_t i = 0; i < kRows; ++i) {
            const std::vector<double> r = row(rounded_x, n, i);
            const RowSoftmax rs(r);
            const double lse = rs.max + std::log(rs.sum);
            for (int64_t j = 0; j < n; ++j) {
              const double q = (j == targets[static_cast<size_t>(i)] ? 1 - smoothing : 0) +
                               smoothing / static_cast<double>(n);
              if (q > 0) want_loss -= q * (r[static_cast<size_t>(j)] - lse);
              want_grad.push_back((rs.probability(r[static_cast<size_t>(j)]) - q) /
                                  static_cast<double>(kRows));
            }
          }
          want_loss /= static_cast<double>(kRows);
          const Tensor loss =
              cross_entropy(x, target, CrossEntropyOptions{.label_smoothing = smoothing});
          const Tensor grad = autograd::grad({loss}, {x})[0];
          const Tol t = tol(dtype);
          CHECK(mismatch(values(loss), {want_loss}, Tol{t.rtol, 10 * t.atol}) == "");
          CHECK(mismatch(values(grad), want_grad, t) == "");
        }
      }
    }
  });
}

// Over the last dim of [3, n], with weight and bias. The outputs are O(1) after normalization;
// float32 statistics carry ~1e-7 relative error, which atol 1e-5 covers where the output
// cancels near 0.
TEST_CASE("layer_norm and rms_norm of every CPU ISA variant match a float64 reference",
          "[runtime][isa]") {
  for_each_isa([] {
    for (DType dtype : {kFloat32, kFloat64}) {
      const Tol t = dtype == kFloat64 ? Tol{1e-12, 1e-12} : Tol{1e-5, 1e-5};
      for (int64_t n : kLengths) {
        for (bool strided : {false, true}) {
          INFO(dtype << " n=" << n << (strided ? " strided" : " contiguous"));
          const std::vector<double> v = uniform(kRows * n, -3, 5, static_cast<uint64_t>(n));
          const Tensor x = matrix_tensor(v, kRows, n, dtype, strided);
          const Tensor w = vector_tensor(uniform(n, 0.5, 1.5, 7), dtype, false);
          const Tensor b = vector_tensor(uniform(n, -1, 1, 8), dtype, false);
          const std::vector<double> xv = values(x), wv = values(w), bv = values(b);
          constexpr double kEps = 1e-5;
          std::vector<double> want_ln, want_rms;
          for (int64_t i = 0; i < kRows; ++i) {
            const std::vector<double> r = row(xv, n, i);
            double mean = 0, sq = 0;
            for (double e : r) {
              mean += e;
              sq += e * e;
            }
            mean /= static_cast<double>(n);
            double var = 0;
            for (double e : r) var += (e - mean) * (e - mean);
            var /= static_cast<double>(n);
            const double rstd = 1 / std::sqrt(var + kEps);
            const double rrms = 1 / std::sqrt(sq / static_cast<double>(n) + kEps);
            for (int64_t j = 0; j < n; ++j) {
              const auto k = static_cast<size_t>(j);
              want_ln.push_back((r[k] - mean) * rstd * wv[k] + bv[k]);
              want_rms.push_back(r[k] * rrms * wv[k]);
            }
          }
          CHECK(mismatch(values(layer_norm(x, {n}, w, b, kEps)), want_ln, t) == "");
          CHECK(mismatch(values(rms_norm(x, {n}, w, kEps)), want_rms, t) == "");
        }
      }
    }
  });
}

TEST_CASE("each CPU ISA variant installs its own kernels", "[runtime][isa]") {
  const IsaGuard guard;
  std::ostringstream ran;
  std::vector<KernelTable> tables;
  for (CpuIsa isa : compiled_cpu_isas()) {
    set_cpu_isa(isa);
    CHECK(active_cpu_isa() == isa);
    tables.push_back(kernels(DeviceType::CPU, "test"));
    ran << " " << to_string(isa);
  }
  WARN("CPU ISA variants compiled and supported here:" << ran.str());
  REQUIRE(!compiled_cpu_isas().empty());
  CHECK(compiled_cpu_isas().front() == CpuIsa::kBaseline);
  for (size_t i = 0; i < tables.size(); ++i) {
    for (size_t j = i + 1; j < tables.size(); ++j) {
      INFO(to_string(compiled_cpu_isas()[i]) << " vs " << to_string(compiled_cpu_isas()[j]));
      CHECK(tables[i].unary != tables[j].unary);
      CHECK(tables[i].binary != tables[j].binary);
      CHECK(tables[i].pointwise_grad != tables[j].pointwise_grad);
      CHECK(tables[i].reduce != tables[j].reduce);
      CHECK(tables[i].softmax != tables[j].softmax);
      CHECK(tables[i].layer_norm != tables[j].layer_norm);
      CHECK(tables[i].rms_norm != tables[j].rms_norm);
      // The families outside the variants are the same functions.
      CHECK(tables[i].copy == tables[j].copy);
      CHECK(tables[i].matmul == tables[j].matmul);
    }
  }
}

TEST_CASE("CPU ISA names parse, and bad or unavailable variants raise", "[runtime][isa]") {
  for (CpuIsa isa : kAllIsas) CHECK(parse_cpu_isa(to_string(isa)) == isa);
  for (const char* bad : {"", "AVX2", "avx", "avx512f", "sse2", "x86-64-v3"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_cpu_isa(bad, "environment variable TESSERA_CPU_ISA"), Error);
    CHECK_THROWS_WITH(parse_cpu_isa(bad, "environment variable TESSERA_CPU_ISA"),
                      Catch::Contains("TESSERA_CPU_ISA") &&
                          Catch::Contains(std::string("'") + bad + "'") &&
                          Catch::Contains("baseline, avx2, avx512"));
  }
  const IsaGuard guard;
  const CpuIsa before = active_cpu_isa();
  for (CpuIsa isa : kAllIsas) {
    const auto available = compiled_cpu_isas();
    if (std::find(available.begin(), available.end(), isa) != available.end()) continue;
    WARN("CPU ISA variant " << to_string(isa) << " is not available here: set_cpu_isa must raise");
    CHECK_THROWS_WITH(set_cpu_isa(isa),
                      Catch::Contains("[set_cpu_isa]") && Catch::Contains(to_string(isa)));
  }
  CHECK_THROWS_WITH(set_cpu_isa(static_cast<CpuIsa>(7)), Catch::Contains("[set_cpu_isa]"));
  CHECK(active_cpu_isa() == before);
}

}  // namespace tessera::runtime_test
