// Gradients of dropout (the forward's mask, scaled) and scaled_dot_product_attention (composed of
// recorded ops), and requires_grad in the random factories.

#include <catch2/catch.hpp>

#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using Inputs = std::vector<Tensor>;

TEST_CASE("dropout gradient is the forward's mask scaled by 1 / (1 - p)", "[nn_grad]") {
  const double p = 0.4;
  Tensor x = random_leaf({6, 7}, 1, 0.5, 1.5);  // no zeros: kept elements are visible in out
  Generator gen(123);
  Tensor out = dropout(x, p, true, &gen);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(out.grad_fn()->name() == "NativeDropoutBackward0");
  sum(out).backward();
  // The same mask as the forward without grad from the same generator state.
  Generator again(123);
  Tensor mask = dropout(ones({6, 7}, kFloat64), p, true, &again);
  CHECK(allclose(x.grad(), mask, 0.0, 0.0));
  Generator third(123);
  CHECK(allclose(out, dropout(x.detach(), p, true, &third), 0.0, 0.0));
  int64_t kept = 0;
  for (double m : mask.to_vector<double>()) {
    CHECK((m == 0.0 || m == Approx(1.0 / (1.0 - p))));
    kept += m != 0.0;
  }
  CHECK(kept > 0);
  CHECK(kept < 42);
  CHECK(allclose(x.grad() * x, out));
}

TEST_CASE("dropout gradcheck with a fixed generator, transposed input", "[nn_grad]") {
  auto f = [](const Inputs& in) {
    Generator gen(7);
    return dropout(in[0], 0.3, true, &gen);
  };
  CHECK(gradcheck(f, {random_leaf({4, 5}, 1)}));
  CHECK(gradcheck(f, {transposed_leaf({4, 5}, 2)}));
  CHECK(gradcheck(f, {random_leaf({0, 5}, 3)}));
  CHECK(gradgradcheck(f, {random_leaf({3, 4}, 4)}));
}

TEST_CASE("dropout identity and p = 1", "[nn_grad]") {
  Tensor x = random_leaf({3, 4}, 1);
  Tensor eval = dropout(x, 0.5, false);
  CHECK(eval.unsafe_impl() == x.unsafe_impl());  // the input itself, as PyTorch
  CHECK(dropout(x, 0.0).unsafe_impl() == x.unsafe_impl());
  Tensor all = dropout(x, 1.0);
  CHECK(allclose(all, zeros({3, 4}, kFloat64)));
  sum(all).backward();
  CHECK(allclose(x.grad(), zeros({3, 4}, kFloat64)));
  CHECK(dropout(x.detach(), 0.5).grad_fn() == nullptr);
  CHECK_THROWS_WITH(dropout(x, 1.5), Catch::Contains("[dropout]"));
}

TEST_CASE("rand and randn honour requires_grad; randint refuses it", "[nn_grad]") {
  Tensor r = rand({2, 3}, TensorOptions().requires_grad(true));
  CHECK(r.requires_grad());
  CHECK(r.is_leaf());
  Tensor n = randn({2}, TensorOptions().dtype(kFloat64).requires_grad(true));
  CHECK(n.requires_grad());
  CHECK(n.is_leaf());
  CHECK_FALSE(rand({2}).requires_grad());
  CHECK_THROWS_WITH(randint(0, 5, {2}, TensorOptions(kInt64).requires_grad(true)),
                    Catch::Contains("[randint] only tensors of floating point dtype can require "
                                    "gradients, got int64"));
  CHECK(randint(0, 5, {2}, TensorOptions(kFloat32).requires_grad(true)).requires_grad());
}

TEST_CASE("scaled_dot_product_attention gradients", "[nn_grad]") {
  const Inputs qkv{random_leaf({2, 3, 4}, 1), random_leaf({2, 5, 4}, 2), random_leaf({2, 5, 6}, 3)};
  auto plain = [](const Inputs& in) { return scaled_dot_product_attention(in[0], in[1], in[2]); };
  CHECK(gradcheck(plain, qkv));
  CHECK(gradcheck(plain, {transposed_leaf({2, 3, 4}, 4), random_leaf({2, 5, 4}, 5),
                          transposed_leaf({2, 5, 6}, 6)}));
  auto causal = [](const Inputs& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, 0.7);
  };
  CHECK(gradcheck(causal, qkv));
  CHECK(gradgradcheck(causal, qkv));
  // Key and value without the batch dim broadcast against the query's.
  CHECK(gradcheck(plain,
                  {random_leaf({2, 3, 4}, 8), random_leaf({5, 4}, 9), random_leaf({5, 6}, 10)}));
  // A bool mask with a row masked out entirely: that row attends to nothing, gradient 0.
  Tensor keep = rand({3, 5}) > 0.4;
  keep.select(0, 1).fill_(false);
  auto bool_mask = [keep](const Inputs& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], keep);
  };
  CHECK(gradcheck(bool_mask, qkv));
  auto additive = [](const Inputs& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
  };
  Inputs with_mask = qkv;
  with_mask.push_back(random_leaf({3, 5}, 7));
  CHECK(gradcheck(additive, with_mask));
  auto dropped = [](const Inputs& in) {
    Generator gen(3);
    return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.3, false, std::nullopt, &gen);
  };
  CHECK(gradcheck(dropped, qkv));
}

TEST_CASE("scaled_dot_product_attention: fully masked additive rows get zero gradients",
          "[nn_grad]") {
  Tensor q = random_leaf({2, 3}, 1);
  Tensor k = random_leaf({4, 3}, 2);
  Tensor v = random_leaf({4, 2}, 3);
  Tensor mask = zeros({2, 4}, kFloat64);
  mask.select(0, 0).fill_(-std::numeric_limits<double>::infinity());
  Tensor out = scaled_dot_product_attention(q, k, v, mask);
  CHECK(allclose(out.select(0, 0), zeros({2}, kFloat64)));
  sum(out).backward();
  CHECK(allclose(q.grad().select(0, 0), zeros({3}, kFloat64)));
  for (const Tensor& g : {q.grad(), k.grad(), v.grad()}) {
    for (double e : g.to_vector<double>()) CHECK(std::isfinite(e));
  }
}

}  // namespace
}  // namespace tessera::autograd_test
