// Gradients of embedding and cross_entropy: gradcheck over index layouts, reductions, ignored
// targets and label smoothing, gradgradcheck, and recording behaviour.

#include <catch2/catch.hpp>

#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using Inputs = std::vector<Tensor>;

Tensor int64s(const std::vector<int64_t>& values, const Shape& shape) {
  return from_vector(values, shape);
}

TEST_CASE("embedding gradient accumulates repeated indices", "[nn_grad]") {
  Tensor weight = random_leaf({4, 3}, 1);
  Tensor indices = int64s({2, 0, 2, 2, 3, 0}, {2, 3});
  Tensor out = embedding(weight, indices);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(out.grad_fn()->name() == "EmbeddingBackward0");
  CHECK(allclose(out, embedding(weight.detach(), indices), 0.0, 0.0));
  CHECK(embedding(weight.detach(), indices).grad_fn() == nullptr);
  sum(out).backward();
  const std::vector<double> rows{2, 0, 3, 1};  // occurrences of each row
  std::vector<double> expected;
  for (double r : rows) expected.insert(expected.end(), 3, r);
  CHECK(weight.grad().to_vector<double>() == expected);
}

TEST_CASE("embedding gradient of float16 weights sums in float32", "[nn_grad]") {
  // 2048 + 1 + 1 + ... stays 2048 when summed in float16 (its spacing is 2 there); the exact
  // sum, 2048 + 2048 * 1, is representable.
  Tensor weight = zeros({2, 1}, kFloat16).requires_grad_();
  std::vector<int64_t> idx(2050, 1);
  idx[0] = 0;
  Tensor out = embedding(weight, int64s(idx, {2050}));
  Tensor g = ones({2050, 1}, kFloat16);
  g.select(0, 1).fill_(2048.0);
  out.backward(g);
  CHECK(weight.grad().dtype() == kFloat16);
  CHECK(weight.grad().to_vector<double>() == std::vector<double>{1.0, 4096.0});
}

TEST_CASE("embedding gradients", "[nn_grad]") {
  const Tensor idx64 = int64s({1, 4, 1, 0, 3, 1}, {3, 2});
  const Tensor idx32 = idx64.to(kInt32);
  for (const Tensor& idx :
       {idx64, idx32, idx64.t(), idx64.reshape({6}), int64s({}, {0}), int64s({2}, {})}) {
    auto f = [idx](const Inputs& in) { return embedding(in[0], idx); };
    CHECK(gradcheck(f, {random_leaf({5, 3}, 2)}));
    CHECK(gradcheck(f, {transposed_leaf({5, 3}, 3)}));
    CHECK(gradgradcheck(f, {random_leaf({5, 3}, 4)}));
  }
}

TEST_CASE("embedding's backward records its own backward", "[nn_grad]") {
  Tensor weight = random_leaf({3, 2}, 1);
  Tensor indices = int64s({0, 2, 0}, {3});
  Tensor out = embedding(weight, indices);
  Tensor v = random_leaf({3, 2}, 2);
  Tensor g = autograd::grad({out}, {weight}, {v}, {.create_graph = true})[0];
  REQUIRE(g.grad_fn() != nullptr);
  CHECK(g.grad_fn()->name() == "EmbeddingDenseBackward0");
  // d(sum(g))/dv: each row of v reaches g once.
  Tensor dv = autograd::grad({sum(g)}, {v})[0];
  CHECK(allclose(dv, ones({3, 2}, kFloat64)));
}

TEST_CASE("embedding input errors are unchanged under grad", "[nn_grad]") {
  Tensor weight = random_leaf({3, 2}, 1);
  CHECK_THROWS_WITH(embedding(weight, int64s({3}, {1})), Catch::Contains("[embedding]"));
  CHECK_THROWS_WITH(embedding(weight, weight), Catch::Contains("[embedding]"));
}

TEST_CASE("cross_entropy gradients", "[nn_grad]") {
  const Tensor target = int64s({1, -100, 4, 0}, {4});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    for (double ls : {0.0, 0.3}) {
      const CrossEntropyOptions o{.ignore_index = -100, .label_smoothing = ls, .reduction = r};
      auto f = [&](const Inputs& in) { return cross_entropy(in[0], target, o); };
      CHECK(gradcheck(f, {random_leaf({4, 5}, 1, -2.0, 2.0)}));
      CHECK(gradcheck(f, {transposed_leaf({4, 5}, 2, -2.0, 2.0)}));
      auto single = [&](const Inputs& in) { return cross_entropy(in[0], int64s({3}, {}), o); };
      CHECK(gradcheck(single, {random_leaf({5}, 3)}));
      const Tensor spatial = int64s({0, 2, 1, 1, -100, 2}, {2, 3});
      auto nd = [&](const Inputs& in) { return cross_entropy(in[0], spatial, o); };
      CHECK(gradcheck(nd, {random_leaf({2, 3, 3}, 4)}));
      CHECK(gradcheck(f, {random_leaf({4, 5}, 5)}));
      auto other_ignore = [&](const Inputs& in) {
        return cross_entropy(in[0], int64s({2, 0, 2}, {3}),
                             {.ignore_index = 2, .label_smoothing = ls, .reduction = r});
      };
      CHECK(gradcheck(other_ignore, {random_leaf({3, 4}, 6)}));
    }
  }
}

TEST_CASE("cross_entropy second derivatives", "[nn_grad]") {
  const Tensor target = int64s({2, -100, 0}, {3});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    const CrossEntropyOptions o{.label_smoothing = 0.2, .reduction = r};
    auto f = [&](const Inputs& in) { return cross_entropy(in[0], target, o); };
    CHECK(gradgradcheck(f, {random_leaf({3, 4}, 1)}));
  }
  auto plain = [&](const Inputs& in) { return cross_entropy(in[0], target); };
  CHECK(gradgradcheck(plain, {transposed_leaf({3, 4}, 2)}));
}

TEST_CASE("cross_entropy records and matches the forward without grad", "[nn_grad]") {
  Tensor logits = random_leaf({3, 4}, 1);
  const Tensor target = int64s({2, -100, 0}, {3});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    const CrossEntropyOptions o{.label_smoothing = 0.1, .reduction = r};
    Tensor with = cross_entropy(logits, target, o);
    REQUIRE(with.grad_fn() != nullptr);
    CHECK(with.grad_fn()->name() == "NllLossBackward0");
    Tensor without = cross_entropy(logits.detach(), target, o);
    CHECK(without.grad_fn() == nullptr);
    CHECK(allclose(with, without, 0.0, 0.0));
  }
}

TEST_CASE("cross_entropy mean over no counted target: nan loss, zero gradient", "[nn_grad]") {
  Tensor logits = random_leaf({2, 3}, 1);
  Tensor loss = cross_entropy(logits, int64s({-100, -100}, {2}));
  CHECK(std::isnan(loss.item<double>()));
  loss.backward();
  CHECK(allclose(logits.grad(), zeros({2, 3}, kFloat64)));
}

TEST_CASE("cross_entropy input errors are unchanged under grad", "[nn_grad]") {
  Tensor logits = random_leaf({2, 3}, 1);
  CHECK_THROWS_WITH(cross_entropy(logits, int64s({0, 3}, {2})), Catch::Contains("[cross_entropy]"));
  CHECK_THROWS_WITH(cross_entropy(logits, int64s({0}, {1})), Catch::Contains("[cross_entropy]"));
}

}  // namespace
}  // namespace tessera::autograd_test
