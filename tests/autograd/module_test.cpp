// nn::Module and the layers: parameter naming and traversal, hooks, train/eval, to(), zero_grad,
// initialization, and forward results against naive loops or the functional ops.

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::module_test {
namespace {

using nn::Linear;
using nn::Module;
using nn::Sequential;

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> names;
  for (const auto& entry : named) names.push_back(entry.first);
  return names;
}

// A user-defined module with children, a buffer and its own parameter.
struct TwoLayer : Module {
  TwoLayer() : Module("TwoLayer") {
    fc1 = register_module("fc1", std::make_shared<Linear>(3, 4, true, kFloat64));
    fc2 = register_module("fc2", std::make_shared<Linear>(4, 2, false, kFloat64));
    scale = register_parameter("scale", ones({2}, kFloat64));
    steps = register_buffer("steps", zeros({1}, kInt64));
    running = register_buffer("running", zeros({2}, kFloat32));
  }
  Tensor forward(const Tensor& x) override { return (*fc2)(relu((*fc1)(x))) * scale; }

  std::shared_ptr<Linear> fc1;
  std::shared_ptr<Linear> fc2;
  Tensor scale;
  Tensor steps;
  Tensor running;
};

TEST_CASE("named_parameters uses dotted paths in registration order", "[module]") {
  TwoLayer model;
  CHECK(names_of(model.named_parameters()) ==
        std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight"});
  CHECK(names_of(model.named_parameters(/*recurse=*/false)) == std::vector<std::string>{"scale"});
  CHECK(names_of(model.named_buffers()) == std::vector<std::string>{"steps", "running"});
  CHECK(model.parameters().size() == 4);
  CHECK(model.buffers().size() == 2);
  CHECK(model.children().size() == 2);
  CHECK(model.named_children()[1].first == "fc2");
  for (const Tensor& p : model.parameters()) {
    CHECK(p.is_leaf());
    CHECK(p.requires_grad());
  }
  // The parameter list holds the parameters themselves, not copies.
  CHECK(model.parameters()[1].unsafe_impl() == model.fc1->weight().unsafe_impl());
}

TEST_CASE("Sequential names its children by position", "[module]") {
  auto seq = std::make_shared<Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<Linear>(2, 3), std::make_shared<nn::ReLU>()});
  seq->push_back(std::make_shared<Linear>(3, 1, false));
  Sequential outer{seq, std::make_shared<nn::Dropout>(0.1)};
  CHECK(names_of(outer.named_parameters()) ==
        std::vector<std::string>{"0.0.weight", "0.0.bias", "0.2.weight"});
  CHECK(seq->size() == 3);
  CHECK((*seq)[1]->name() == "ReLU");
  CHECK(seq->at<Linear>(2)->out_features() == 1);
  CHECK_THROWS_WITH(seq->at<Linear>(1), Catch::Contains("[Sequential::at] child 1 is a ReLU"));
  CHECK_THROWS_WITH((*seq)[3], Catch::Contains("[Sequential] index 3 is out of range"));
  // Empty: the identity.
  Tensor x = ones({2});
  CHECK(Sequential()(x).unsafe_impl() == x.unsafe_impl());
}

TEST_CASE("named_modules lists the module and its descendants once", "[module]") {
  auto inner = std::make_shared<Sequential>(std::initializer_list<nn::ModulePtr>{
      std::make_shared<nn::ReLU>(), std::make_shared<Linear>(2, 2)});
  Sequential outer{inner, std::make_shared<nn::GELU>(), inner};
  std::vector<std::string> names;
  std::vector<std::string> kinds;
  for (const auto& [name, module] : outer.named_modules()) {
    names.push_back(name);
    kinds.push_back(module->name());
  }
  CHECK(names == std::vector<std::string>{"", "0", "0.0", "0.1", "1"});
  CHECK(kinds == std::vector<std::string>{"Sequential", "Sequential", "ReLU", "Linear", "GELU"});
}

TEST_CASE("shared modules and tied weights are listed once", "[module]") {
  auto shared = std::make_shared<Linear>(2, 2);
  Sequential seq{shared, std::make_shared<nn::ReLU>(), shared};
  CHECK(names_of(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  Module tied;
  Tensor w = tied.register_parameter("a", ones({2}));
  tied.register_parameter("b", w);
  CHECK(tied.parameters().size() == 1);
}

TEST_CASE("register_* validate names and tensors", "[module]") {
  Module m("Custom");
  const Tensor held = m.register_parameter("w", ones({2}));
  CHECK_THROWS_WITH(m.register_buffer("w", ones({2})),
                    Catch::Contains("[Custom::register_buffer] name \"w\" is already used"));
  CHECK_THROWS_WITH(m.register_module("w", std::make_shared<nn::ReLU>()),
                    Catch::Contains("already used"));
  CHECK_THROWS_WITH(m.register_parameter("a.b", ones({2})),
                    Catch::Contains("must not contain '.'"));
  CHECK_THROWS_WITH(m.register_parameter("", ones({2})), Catch::Contains("must not be empty"));
  CHECK_THROWS_WITH(m.register_parameter("i", zeros({2}, kInt64)),
                    Catch::Contains("floating point"));
  CHECK_THROWS_WITH(m.register_module("n", std::shared_ptr<Module>()), Catch::Contains("is null"));
  CHECK_THROWS_WITH(m.forward(ones({1})), Catch::Contains("[Custom::forward]"));
  // requires_grad = false: a parameter that is not trained.
  Tensor frozen = m.register_parameter("frozen", ones({2}), /*requires_grad=*/false);
  CHECK_FALSE(frozen.requires_grad());
  // An existing parameter's name replaces it in place: handles held before see the new tensor.
  const Tensor replaced = m.register_parameter("w", full({3}, 2.0));
  CHECK(held.sizes() == Shape{3});
  CHECK(equal(held, full({3}, 2.0)));
  CHECK(held.requires_grad());
  CHECK(held.is_leaf());
  CHECK(equal(replaced, held));
  CHECK(m.parameters().size() == 2);
  sum(held * held).backward();
  CHECK(equal(replaced.grad(), full({3}, 4.0)));
}

TEST_CASE("Linear forward is x @ W^T + b", "[module]") {
  Generator gen(7);
  Linear layer(4, 3, true, kFloat64, &gen);
  Tensor x = randn({2, 5, 4}, kFloat64, &gen);
  const Tensor y = layer(x);
  REQUIRE(y.shape() == Shape{2, 5, 3});
  const std::vector<double> xs = x.to_vector<double>();
  const std::vector<double> w = layer.weight().to_vector<double>();
  const std::vector<double> b = layer.bias().to_vector<double>();
  const std::vector<double> ys = y.to_vector<double>();
  for (int64_t row = 0; row < 10; ++row) {
    for (int64_t o = 0; o < 3; ++o) {
      double expected = b[o];
      for (int64_t i = 0; i < 4; ++i) expected += xs[row * 4 + i] * w[o * 4 + i];
      CHECK(ys[row * 3 + o] == Approx(expected).epsilon(1e-12));
    }
  }
  Linear no_bias(4, 3, false, kFloat64, &gen);
  CHECK_FALSE(no_bias.bias().defined());
  CHECK(names_of(no_bias.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(allclose(no_bias(x), matmul(x, no_bias.weight().t())));
  CHECK_THROWS_WITH(layer(ones({2, 3}, kFloat64)), Catch::Contains("[Linear] expected input"));
}

TEST_CASE("Linear initialization: U(-1/sqrt(in), 1/sqrt(in)), reproducible", "[module]") {
  Generator gen1(123);
  Generator gen2(123);
  Linear a(16, 32, true, {}, &gen1);
  Linear b(16, 32, true, {}, &gen2);
  CHECK(equal(a.weight(), b.weight()));
  CHECK(equal(a.bias(), b.bias()));
  CHECK(a.weight().dtype() == kFloat32);
  const double bound = 1.0 / std::sqrt(16.0);
  for (const Tensor& p : a.parameters()) {
    CHECK(max(p).item<double>() <= bound);
    CHECK(min(p).item<double>() >= -bound);
  }
  // Spread over the whole interval (512 draws).
  CHECK(max(a.weight()).item<double>() > 0.9 * bound);
  CHECK(min(a.weight()).item<double>() < -0.9 * bound);
  Generator gen3(124);
  CHECK_FALSE(equal(Linear(16, 32, true, {}, &gen3).weight(), a.weight()));
}

TEST_CASE("forward hooks can replace the input and the output, and be removed", "[module]") {
  Linear layer(2, 2, true, kFloat64);
  Tensor x = from_vector<double>({1.0, 2.0}, {1, 2});
  const Tensor plain = layer(x);
  std::vector<std::string> order;
  Tensor seen_input;
  nn::RemovableHandle pre = layer.register_forward_pre_hook([&](Module& m, const Tensor& in) {
    order.push_back("pre:" + m.name());
    return in * 2.0;
  });
  nn::RemovableHandle observe =
      layer.register_forward_hook([&](Module&, const Tensor& in, const Tensor&) {
        order.push_back("observe");
        seen_input = in;
        return Tensor();  // undefined: keep the output
      });
  nn::RemovableHandle post = layer.register_forward_hook(
      [&](Module&, const Tensor&, const Tensor& out) { return out + 1.0; });
  CHECK(allclose(layer(x), layer.forward(x * 2.0) + 1.0));
  CHECK(order == std::vector<std::string>{"pre:Linear", "observe"});
  CHECK(allclose(seen_input, x * 2.0));  // forward hooks see the replaced input
  pre.remove();
  post.remove();
  post.remove();  // a second remove is a no-op
  CHECK(allclose(layer(x), plain));
  observe.remove();
  order.clear();
  layer(x);
  CHECK(order.empty());
}

TEST_CASE("Sequential runs its children's hooks", "[module]") {
  auto first = std::make_shared<nn::ReLU>();
  Sequential seq{first, std::make_shared<nn::ReLU>()};
  int calls = 0;
  first->register_forward_hook([&](Module&, const Tensor&, const Tensor& out) {
    ++calls;
    return out - 1.0;
  });
  const Tensor y = seq(from_vector<double>({3.0, -1.0}, {2}));
  CHECK(calls == 1);
  CHECK(y.to_vector<double>() == std::vector<double>{2.0, 0.0});
}

TEST_CASE("train and eval apply to all descendants; Dropout is the identity in eval", "[module]") {
  Generator gen(3);
  auto drop = std::make_shared<nn::Dropout>(0.5, &gen);
  Sequential seq{std::make_shared<Sequential>(std::initializer_list<nn::ModulePtr>{drop})};
  CHECK(drop->is_training());
  seq.eval();
  CHECK_FALSE(seq.is_training());
  CHECK_FALSE(drop->is_training());
  Tensor x = rand({64}, kFloat64, &gen) + 1.0;
  CHECK(equal(seq(x), x));

  seq.train();
  CHECK(drop->is_training());
  const std::vector<double> xs = x.to_vector<double>();
  const std::vector<double> ys = seq(x).to_vector<double>();
  int zeros_seen = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (ys[i] == 0.0) {
      ++zeros_seen;
    } else {
      CHECK(ys[i] == Approx(2.0 * xs[i]));
    }
  }
  CHECK(zeros_seen > 10);
  CHECK(zeros_seen < 54);
  CHECK_THROWS_WITH(nn::Dropout(1.5), Catch::Contains("[Dropout] dropout probability"));
}

TEST_CASE("to(DType) and to(Device) keep each parameter's identity", "[module]") {
  TwoLayer model;
  Tensor weight = model.fc1->weight();
  weight.set_grad(ones({4, 3}, kFloat64));
  model.to(kFloat32);
  CHECK(weight.dtype() == kFloat32);  // the handle held before the move sees the new data
  CHECK(model.fc1->weight().dtype() == kFloat32);
  CHECK(weight.is_leaf());
  CHECK(weight.requires_grad());
  CHECK(weight.grad().dtype() == kFloat32);
  CHECK(model.steps.dtype() == kInt64);  // integer buffers keep their dtype
  CHECK(model.running.dtype() == kFloat32);
  model.to(kFloat64);
  CHECK(model.running.dtype() == kFloat64);
  CHECK(model.scale.dtype() == kFloat64);
  model.to(Device::cpu());  // already there: unchanged
  CHECK(weight.dtype() == kFloat64);
  CHECK_THROWS_WITH(model.to(kInt32), Catch::Contains("[TwoLayer::to] only floating point"));
  // Forward works after the cast (same dtype everywhere).
  CHECK(model(ones({5, 3}, kFloat64)).dtype() == kFloat64);
}

TEST_CASE("zero_grad clears or zeroes all gradients", "[module]") {
  TwoLayer model;
  for (const Tensor& p : model.parameters()) p.set_grad(ones_like(p));
  model.zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : model.parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(equal(p.grad(), zeros_like(p)));
  }
  model.zero_grad();
  for (const Tensor& p : model.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("Embedding, LayerNorm and RMSNorm match their functional ops", "[module]") {
  Generator gen(11);
  nn::Embedding emb(1000, 8, kFloat64, &gen);
  CHECK(emb.weight().shape() == Shape{1000, 8});
  CHECK(std::abs(mean(emb.weight()).item<double>()) < 0.05);  // N(0, 1)
  CHECK(std::abs(var(emb.weight()).item<double>() - 1.0) < 0.1);
  Tensor idx = from_vector<int64_t>({3, 999, 0, 3}, {2, 2});
  CHECK(equal(emb(idx), embedding(emb.weight(), idx)));

  nn::LayerNorm ln({4}, 1e-3, true, true, kFloat64);
  CHECK(names_of(ln.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(equal(ln.weight(), ones({4}, kFloat64)));
  CHECK(equal(ln.bias(), zeros({4}, kFloat64)));
  Tensor x = randn({3, 4}, kFloat64, &gen);
  CHECK(allclose(ln(x), layer_norm(x, {4}, {}, {}, 1e-3)));
  CHECK(nn::LayerNorm({4}, 1e-5, false).parameters().empty());
  CHECK(nn::LayerNorm({4}, 1e-5, true, false).parameters().size() == 1);

  nn::RMSNorm rms({4}, std::nullopt, true, kFloat64);
  CHECK(names_of(rms.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(allclose(rms(x), rms_norm(x, {4})));
  CHECK_THROWS_WITH(nn::RMSNorm(Shape{}), Catch::Contains("[RMSNorm] normalized_shape"));
}

TEST_CASE("MLP is a Sequential of Linear, activation and Dropout layers", "[module]") {
  Generator gen(5);
  nn::MLP mlp({3, 8, 8, 2},
              {.activation = nn::Activation::GELU, .dropout = 0.1, .generator = &gen});
  std::vector<std::string> kinds;
  for (const auto& child : mlp.children()) kinds.push_back(child->name());
  CHECK(kinds == std::vector<std::string>{"Linear", "GELU", "Dropout", "Linear", "GELU", "Dropout",
                                          "Linear"});
  CHECK(names_of(mlp.named_parameters()) ==
        std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias"});
  nn::MLP small({3, 2});
  CHECK(small.size() == 1);
  mlp.eval();
  CHECK(mlp(ones({5, 3})).shape() == Shape{5, 2});
  CHECK_THROWS_WITH(nn::MLP({3}), Catch::Contains("[MLP] needs at least two layer sizes"));
  CHECK_THROWS_WITH(nn::MLP({3, 2}, {.dropout = -0.5}), Catch::Contains("[MLP] dropout"));
}

}  // namespace
}  // namespace tessera::module_test
