// optim::SGD and optim::AdamW against scalar float64 re-implementations of PyTorch's update rules,
// over several steps with gradients set by hand (so these tests need no differentiable ops).

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::optim_test {
namespace {

using optim::AdamW;
using optim::AdamWOptions;
using optim::ParamGroup;
using optim::SGD;
using optim::SGDOptions;

constexpr int kSteps = 6;
const std::vector<double> kInitial = {0.5, -1.2, 2.0, 0.1, -0.3};

Tensor leaf_of(const std::vector<double>& values) {
  Tensor t = from_vector(values, Shape{static_cast<int64_t>(values.size())});
  t.requires_grad_();
  return t;
}

// A gradient that depends on the parameter and the step, like a real loss's would.
std::vector<double> fake_grad(const std::vector<double>& p, int step) {
  std::vector<double> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    g[i] = std::sin(static_cast<double>(i) + 0.7 * step) + 0.3 * p[i];
  }
  return g;
}

void check_close(const Tensor& actual, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> got = actual.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(expected[i]).margin(tol).epsilon(tol));
  }
}

// Gives a non-leaf without relying on any built-in op's formula.
struct Twice : autograd::Function<Twice> {
  static Tensor forward(autograd::AutogradContext* /*ctx*/, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(autograd::AutogradContext* /*ctx*/,
                                      std::vector<Tensor> grads) {
    return {grads[0] * 2.0};
  }
};

// torch.optim.SGD for one parameter, element by element.
struct SgdReference {
  explicit SgdReference(SGDOptions options) : o(options) {}
  SGDOptions o;
  std::vector<double> buf;
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    const bool first = buf.empty();
    if (first) buf.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double g = o.maximize ? -grad[i] : grad[i];
      g += o.weight_decay * p[i];
      if (o.momentum != 0.0) {
        buf[i] = first ? g : o.momentum * buf[i] + (1.0 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * g;
    }
  }
};

// torch.optim.AdamW for one parameter, element by element.
struct AdamWReference {
  explicit AdamWReference(AdamWOptions options) : o(options) {}
  AdamWOptions o;
  int step_count = 0;
  std::vector<double> m, v, v_max;
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    if (m.empty()) m = v = v_max = std::vector<double>(p.size(), 0.0);
    ++step_count;
    const double bc1 = 1.0 - std::pow(o.beta1, step_count);
    const double bc2 = 1.0 - std::pow(o.beta2, step_count);
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = o.maximize ? -grad[i] : grad[i];
      p[i] *= 1.0 - o.lr * o.weight_decay;
      m[i] = o.beta1 * m[i] + (1.0 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1.0 - o.beta2) * g * g;
      v_max[i] = std::max(v_max[i], v[i]);
      const double second = o.amsgrad ? v_max[i] : v[i];
      p[i] -= o.lr / bc1 * m[i] / (std::sqrt(second) / std::sqrt(bc2) + o.eps);
    }
  }
};

// Runs kSteps of `optimizer` on `param` and of `reference` on a copy, comparing after each step.
template <typename Reference>
void run_against(optim::Optimizer& optimizer, const Tensor& param, Reference& reference) {
  std::vector<double> expected = param.to_vector<double>();
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    const std::vector<double> grad = fake_grad(param.to_vector<double>(), step);
    param.set_grad(from_vector(grad, param.shape()));
    optimizer.step();
    reference.step(expected, grad);
    check_close(param, expected);
  }
  CHECK(param.is_leaf());
  CHECK(param.requires_grad());
}

TEST_CASE("SGD matches PyTorch's update rule", "[optim]") {
  const std::vector<SGDOptions> cases = {
      {.lr = 0.1},
      {.lr = 0.05, .momentum = 0.9},
      {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01},
      {.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true},
      {.lr = 0.1, .momentum = 0.5, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    INFO("case " << c);
    Tensor p = leaf_of(kInitial);
    SGD sgd({p}, cases[c]);
    SgdReference reference(cases[c]);
    run_against(sgd, p, reference);
  }
}

TEST_CASE("SGD keeps the momentum buffer in its state", "[optim]") {
  Tensor p = leaf_of({1.0, 2.0});
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  CHECK_FALSE(sgd.state(p).momentum_buffer.defined());
  p.set_grad(from_vector<double>({1.0, -1.0}, {2}));
  sgd.step();
  check_close(sgd.state(p).momentum_buffer, {1.0, -1.0});
  sgd.step();  // same gradient: buf = 0.9 * buf + g
  check_close(sgd.state(p).momentum_buffer, {1.9, -1.9});
  check_close(p, {1.0 - 0.1 - 0.19, 2.0 + 0.1 + 0.19});
}

TEST_CASE("AdamW matches PyTorch's update rule", "[optim]") {
  const std::vector<AdamWOptions> cases = {
      {},
      {.lr = 0.01, .weight_decay = 0.0},
      {.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0.1},
      {.lr = 0.02, .weight_decay = 0.05, .amsgrad = true},
      {.lr = 0.01, .maximize = true},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    INFO("case " << c);
    Tensor p = leaf_of(kInitial);
    AdamW adamw({p}, cases[c]);
    AdamWReference reference(cases[c]);
    run_against(adamw, p, reference);
    CHECK(adamw.state(p).step == kSteps);
  }
}

TEST_CASE("AdamW's first step is lr * sign(g) thanks to bias correction", "[optim]") {
  // m / (1 - beta1) = g and sqrt(v / (1 - beta2)) = |g|: the first step has size lr whatever the
  // gradient's scale (up to eps).
  Tensor p = leaf_of({0.0, 0.0, 0.0});
  AdamW adamw({p}, {.lr = 0.1, .eps = 0.0, .weight_decay = 0.0});
  p.set_grad(from_vector<double>({1e-3, -5.0, 200.0}, {3}));
  adamw.step();
  check_close(p, {-0.1, 0.1, -0.1});
}

TEST_CASE("AdamW's amsgrad keeps the running maximum of v", "[optim]") {
  Tensor p = leaf_of({1.0});
  AdamW adamw({p}, {.lr = 0.1, .beta2 = 0.5, .weight_decay = 0.0, .amsgrad = true});
  p.set_grad(from_vector<double>({2.0}, {1}));
  adamw.step();  // v = 0.5 * 4 = 2
  p.set_grad(from_vector<double>({0.0}, {1}));
  adamw.step();  // v = 1, the maximum stays 2
  check_close(adamw.state(p).exp_avg_sq, {1.0});
  check_close(adamw.state(p).max_exp_avg_sq, {2.0});
}

TEST_CASE("parameter groups have their own options", "[optim]") {
  Tensor a = leaf_of({1.0, 2.0});
  Tensor b = leaf_of({3.0});
  SGD sgd(std::vector<ParamGroup<SGDOptions>>{{{a}, {.lr = 0.1}}, {{b}, {.lr = 1.0}}});
  a.set_grad(from_vector<double>({1.0, 1.0}, {2}));
  b.set_grad(from_vector<double>({1.0}, {1}));
  sgd.step();
  check_close(a, {0.9, 1.9});
  check_close(b, {2.0});
  // Options may change between steps (a schedule), and groups may be added.
  sgd.param_groups()[0].options.lr = 0.5;
  Tensor c = leaf_of({0.0});
  sgd.add_param_group({{c}, {.lr = 2.0}});
  c.set_grad(from_vector<double>({1.0}, {1}));
  sgd.step();
  check_close(a, {0.4, 1.4});
  check_close(c, {-2.0});
  CHECK(sgd.parameters().size() == 3);
}

TEST_CASE("step skips parameters without a gradient", "[optim]") {
  Tensor a = leaf_of({1.0});
  Tensor b = leaf_of({2.0});
  AdamW adamw({a, b}, {.lr = 0.1});
  a.set_grad(from_vector<double>({1.0}, {1}));
  adamw.step();
  check_close(b, {2.0});
  CHECK(adamw.state(b).step == 0);
  CHECK(adamw.state(a).step == 1);
}

TEST_CASE("zero_grad clears or zeroes the gradients", "[optim]") {
  Tensor a = leaf_of({1.0, 2.0});
  SGD sgd({a}, {.lr = 0.1});
  a.set_grad(from_vector<double>({3.0, 4.0}, {2}));
  sgd.zero_grad(/*set_to_none=*/false);
  REQUIRE(a.grad().defined());
  check_close(a.grad(), {0.0, 0.0});
  sgd.zero_grad();
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("float32 parameters are updated in float32", "[optim]") {
  Tensor p = from_vector<float>({1.0f, -2.0f}, {2});
  p.requires_grad_();
  AdamW adamw({p}, {.lr = 0.1, .weight_decay = 0.0});
  p.set_grad(from_vector<float>({0.5f, -0.5f}, {2}));
  adamw.step();
  CHECK(p.dtype() == kFloat32);
  CHECK(adamw.state(p).exp_avg.dtype() == kFloat32);
  const std::vector<float> got = p.to_vector<float>();
  CHECK(got[0] == Approx(0.9).epsilon(1e-6));
  CHECK(got[1] == Approx(-1.9).epsilon(1e-6));
}

// The one-pass update (autograd/optim/adamw_fused.h) takes contiguous float tensors; a strided
// parameter takes the op-by-op update. Both round the same operations in the same order.
TEST_CASE("AdamW's one-pass update equals the op-by-op update", "[optim]") {
  for (const AdamWOptions& options :
       {AdamWOptions{.lr = 0.05}, AdamWOptions{.lr = 0.02, .weight_decay = 0.1, .amsgrad = true},
        AdamWOptions{.lr = 0.01, .weight_decay = 0.0, .maximize = true}}) {
    manual_seed(3);
    const Tensor values = randn({5, 3});
    Tensor dense = values.clone();
    Tensor strided = values.t().contiguous().t();  // the same values, column-major
    REQUIRE_FALSE(strided.is_contiguous());
    optim::AdamWState dense_state, strided_state;
    for (int step = 0; step < 6; ++step) {
      const Tensor grad = randn({5, 3});
      optim::adamw_update(dense, grad, dense_state, options);
      optim::adamw_update(strided, grad, strided_state, options);
    }
    CHECK(dense.to_vector<float>() == strided.contiguous().to_vector<float>());
    CHECK(dense_state.exp_avg.to_vector<float>() ==
          strided_state.exp_avg.contiguous().to_vector<float>());
    CHECK(dense_state.exp_avg_sq.to_vector<float>() ==
          strided_state.exp_avg_sq.contiguous().to_vector<float>());
  }
}

TEST_CASE("update functions work on shards (Note [Optimizer updates on shards])", "[optim]") {
  // Updating each half of a parameter with its half of the gradient and its own state gives the
  // update of the whole, as a DTensor parameter sharded on dim 0 will do.
  const std::vector<double> values = {0.5, -1.0, 0.25, 2.0};
  Tensor whole = from_vector(values, {4});
  Tensor halves = from_vector(values, {4});
  optim::AdamWState whole_state;
  optim::AdamWState state0;
  optim::AdamWState state1;
  const AdamWOptions options{.lr = 0.1, .amsgrad = true};
  for (int step = 0; step < 3; ++step) {
    Tensor grad = from_vector(fake_grad(whole.to_vector<double>(), step), {4});
    optim::adamw_update(whole, grad, whole_state, options);
    optim::adamw_update(halves.narrow(0, 0, 2), grad.narrow(0, 0, 2), state0, options);
    optim::adamw_update(halves.narrow(0, 2, 2), grad.narrow(0, 2, 2), state1, options);
  }
  check_close(halves, whole.to_vector<double>(), 1e-15);
}

TEST_CASE("optimizer errors name the optimizer", "[optim]") {
  Tensor p = leaf_of({1.0});
  CHECK_THROWS_WITH(SGD({p}, {.lr = -1.0}), Catch::Contains("[SGD] invalid learning rate"));
  SGD sgd({p});
  Tensor q = leaf_of({2.0});
  CHECK_THROWS_WITH(sgd.add_param_group({{q, p}, {}}), Catch::Contains("more than once"));
  sgd.add_param_group({{q}, {}});  // the rejected group did not claim q
  CHECK(sgd.parameters().size() == 2);
  CHECK_THROWS_WITH(SGD({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    Catch::Contains("[SGD] nesterov"));
  CHECK_THROWS_WITH(SGD({p}, {.lr = 0.1, .nesterov = true}), Catch::Contains("[SGD] nesterov"));
  CHECK_THROWS_WITH(AdamW({p}, {.beta1 = 1.0}), Catch::Contains("[AdamW] invalid beta1"));
  CHECK_THROWS_WITH(AdamW({p}, {.beta2 = -0.1}), Catch::Contains("[AdamW] invalid beta2"));
  CHECK_THROWS_WITH(AdamW({p}, {.eps = -1.0}), Catch::Contains("[AdamW] invalid epsilon"));
  CHECK_THROWS_WITH(AdamW({p, p}), Catch::Contains("[AdamW] a parameter"));
  CHECK_THROWS_WITH(SGD(std::vector<ParamGroup<SGDOptions>>{{{p}, {}}, {{p}, {}}}),
                    Catch::Contains("more than once"));
  CHECK_THROWS_WITH(SGD({Tensor()}), Catch::Contains("[SGD] a parameter is an undefined"));
  CHECK_THROWS_WITH(SGD({from_vector<int64_t>({1}, {1})}),
                    Catch::Contains("[SGD] parameters must have a floating point dtype"));
  CHECK_THROWS_WITH(SGD({Twice::apply(p)}), Catch::Contains("[SGD] can't optimize a non-leaf"));
}

TEST_CASE("clip_grad_norm_ scales all gradients together", "[optim]") {
  Tensor a = leaf_of({0.0, 0.0});
  Tensor b = leaf_of({0.0});
  Tensor no_grad = leaf_of({0.0});
  a.set_grad(from_vector<double>({3.0, 4.0}, {2}));
  b.set_grad(from_vector<double>({12.0}, {1}));
  // Total 2-norm 13: no clipping below it.
  CHECK(nn::clip_grad_norm_({a, b, no_grad}, 20.0).item<double>() == Approx(13.0));
  check_close(b.grad(), {12.0});
  CHECK(nn::clip_grad_norm_({a, b, no_grad}, 6.5).item<double>() == Approx(13.0));
  const double coef = 6.5 / (13.0 + 1e-6);
  check_close(a.grad(), {3.0 * coef, 4.0 * coef});
  check_close(b.grad(), {12.0 * coef});
  CHECK_FALSE(no_grad.grad().defined());
  // The infinity norm is the largest magnitude.
  CHECK(nn::clip_grad_norm_({a, b}, 1.0, INFINITY).item<double>() == Approx(12.0 * coef));
  check_close(b.grad(), {12.0 * coef * 1.0 / (12.0 * coef + 1e-6)});
  CHECK(nn::clip_grad_norm_({no_grad}, 1.0).item<double>() == 0.0);
  CHECK_THROWS_WITH(nn::clip_grad_norm_({a}, -1.0), Catch::Contains("[clip_grad_norm_] max_norm"));
}

}  // namespace
}  // namespace tessera::optim_test
