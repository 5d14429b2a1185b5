// End to end: modules + differentiable ops + optimizers. Every parameter's .grad() after backward
// matches central finite differences of the loss (float64), and training makes the loss fall.

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::mlp_test {
namespace {

using LossFn = std::function<Tensor()>;

// Compares each element of each parameter's gradient with (loss(p + eps) - loss(p - eps)) / 2eps,
// perturbing the parameter's storage in place.
void check_gradients_by_finite_differences(const nn::Module& model, const LossFn& loss) {
  for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
  loss().backward();
  const double eps = 1e-6;
  for (const auto& [name, param] : model.named_parameters()) {
    REQUIRE(param.dtype() == kFloat64);
    REQUIRE(param.is_contiguous());
    REQUIRE(param.grad().defined());
    const std::vector<double> analytical = param.grad().to_vector<double>();
    double* data = param.data_ptr<double>();
    NoGradGuard no_grad;
    for (int64_t i = 0; i < param.numel(); ++i) {
      const double saved = data[i];
      data[i] = saved + eps;
      const double plus = loss().item<double>();
      data[i] = saved - eps;
      const double minus = loss().item<double>();
      data[i] = saved;
      INFO(name << "[" << i << "]");
      CHECK(analytical[static_cast<size_t>(i)] ==
            Approx((plus - minus) / (2 * eps)).margin(1e-7).epsilon(1e-5));
    }
  }
}

struct Problem {
  Tensor x;
  Tensor y;
};

// n points in [-1, 1]^2, class 1 where x0 * x1 > 0 (XOR-like: not linearly separable).
Problem quadrants(int64_t n, DType dtype, uint64_t seed) {
  Generator gen(seed);
  Tensor x = rand({n, 2}, dtype, &gen) * 2.0 - 1.0;
  const std::vector<double> xs = x.to_vector<double>();
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = xs[2 * i] * xs[2 * i + 1] > 0 ? 1 : 0;
  return {x, from_vector(labels, {n})};
}

TEST_CASE("MLP gradients match finite differences", "[mlp]") {
  const Problem data = quadrants(7, kFloat64, 1);
  for (nn::Activation activation : {nn::Activation::ReLU, nn::Activation::GELU}) {
    Generator gen(2);
    nn::MLP model({2, 5, 4, 2},
                  {.activation = activation, .tensor_options = kFloat64, .generator = &gen});
    check_gradients_by_finite_differences(model,
                                          [&] { return cross_entropy(model(data.x), data.y); });
  }
}

TEST_CASE("gradients through norms and embeddings match finite differences", "[mlp]") {
  Generator gen(3);
  auto emb = std::make_shared<nn::Embedding>(5, 3, kFloat64, &gen);
  auto body = std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::Linear>(3, 6, true, kFloat64, &gen),
      std::make_shared<nn::LayerNorm>(Shape{6}, 1e-5, true, true, kFloat64),
      std::make_shared<nn::GELU>("tanh"), std::make_shared<nn::Linear>(6, 4, true, kFloat64, &gen),
      std::make_shared<nn::RMSNorm>(Shape{4}, 1e-6, true, kFloat64),
      std::make_shared<nn::Linear>(4, 3, false, kFloat64, &gen)});
  // LayerNorm's and RMSNorm's weights start at ones / zeros: move them off their initial values so
  // that a formula that ignores them would show.
  for (Tensor p : body->parameters()) {
    NoGradGuard no_grad;
    p += rand(p.shape(), kFloat64, &gen) * 0.2;
  }
  nn::Module model("Model");
  model.register_module("emb", emb);
  model.register_module("body", body);
  const Tensor tokens = from_vector<int64_t>({0, 3, 3, 4, 1, 2}, {6});
  const Tensor target = from_vector<int64_t>({2, 0, 1, 1, 0, 2}, {6});
  check_gradients_by_finite_differences(
      model, [&] { return cross_entropy((*body)((*emb)(tokens)), target); });
}

TEST_CASE("gradients accumulate until zero_grad", "[mlp]") {
  const Problem data = quadrants(8, kFloat64, 4);
  nn::MLP model({2, 3, 2}, {.tensor_options = kFloat64});
  cross_entropy(model(data.x), data.y).backward();
  const Tensor first = model.parameters()[0].grad().clone();
  cross_entropy(model(data.x), data.y).backward();
  CHECK(allclose(model.parameters()[0].grad(), first * 2.0));
  model.zero_grad();
  CHECK_FALSE(model.parameters()[0].grad().defined());
}

// Trains `model` full-batch for `steps` steps; returns (first loss, last loss).
std::pair<double, double> train(nn::Module& model, optim::Optimizer& optimizer, const Problem& data,
                                int steps) {
  double first = 0.0;
  double last = 0.0;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model(data.x), data.y);
    loss.backward();
    optimizer.step();
    last = loss.item<double>();
    if (step == 0) first = last;
  }
  return {first, last};
}

TEST_CASE("SGD and AdamW make the loss fall on a small problem", "[mlp]") {
  const Problem data = quadrants(64, kFloat32, 5);
  {
    Generator gen(6);
    nn::MLP model({2, 16, 16, 2}, {.generator = &gen});
    optim::SGD sgd(model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
    const auto [first, last] = train(model, sgd, data, 150);
    INFO("SGD loss " << first << " -> " << last);
    CHECK(last < 0.5 * first);
  }
  {
    Generator gen(6);
    nn::MLP model({2, 16, 16, 2}, {.activation = nn::Activation::GELU, .generator = &gen});
    optim::AdamW adamw(model.parameters(), {.lr = 0.02});
    const auto [first, last] = train(model, adamw, data, 150);
    INFO("AdamW loss " << first << " -> " << last);
    CHECK(last < 0.5 * first);
  }
}

}  // namespace
}  // namespace tessera::mlp_test
