// Gradients of matmul, mm, bmm and linear: gradcheck over every rank combination of matmul,
// broadcast batch dims, transposed and zero-size operands; gradgradcheck of matmul, mm, bmm and
// linear; grad_fn names; and that nothing records when nothing requires grad.

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

// fn(a, b) records a node named grad_fn, computes what it computes without grad, and passes
// gradcheck and (when second_order) gradgradcheck.
void check_product(const BinaryFn& fn, const Tensor& a, const Tensor& b, const std::string& grad_fn,
                   bool second_order = false) {
  INFO("a " << a.sizes() << ", b " << b.sizes());
  const Tensor out = fn(a, b);
  REQUIRE(out.grad_fn() != nullptr);
  CHECK(out.grad_fn()->name() == grad_fn);
  const Tensor plain = fn(a.detach(), b.detach());
  CHECK(plain.grad_fn() == nullptr);
  CHECK(out.sizes() == plain.sizes());
  CHECK(allclose(out.detach(), plain, 0.0, 0.0));
  const auto call = [&](const std::vector<Tensor>& in) { return fn(in[0], in[1]); };
  CHECK(gradcheck(call, {a, b}));
  if (second_order) CHECK(gradgradcheck(call, {a, b}));
}

const BinaryFn kMatmul = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };

TEST_CASE("matmul: gradients for every rank combination", "[linalg_grad]") {
  check_product(kMatmul, random_leaf({4}, 1), random_leaf({4}, 2), "DotBackward0", true);
  check_product(kMatmul, random_leaf({3, 4}, 3), random_leaf({4}, 4), "MvBackward0", true);
  check_product(kMatmul, random_leaf({4}, 5), random_leaf({4, 2}, 6), "MatmulBackward0", true);
  check_product(kMatmul, random_leaf({3, 4}, 7), random_leaf({4, 2}, 8), "MmBackward0", true);
  check_product(kMatmul, random_leaf({2, 3, 4}, 9), random_leaf({2, 4, 2}, 10), "MatmulBackward0",
                true);
  check_product(kMatmul, random_leaf({2, 3, 4}, 11), random_leaf({4, 2}, 12), "MatmulBackward0",
                true);
  check_product(kMatmul, random_leaf({3, 4}, 13), random_leaf({2, 4, 2}, 14), "MatmulBackward0",
                true);
  check_product(kMatmul, random_leaf({4}, 15), random_leaf({2, 4, 3}, 16), "MatmulBackward0");
  check_product(kMatmul, random_leaf({2, 3, 4}, 17), random_leaf({4}, 18), "MatmulBackward0");
}

TEST_CASE("matmul: gradients sum over broadcast batch dims", "[linalg_grad]") {
  check_product(kMatmul, random_leaf({2, 1, 3, 4}, 19), random_leaf({3, 4, 2}, 20),
                "MatmulBackward0", true);
  check_product(kMatmul, random_leaf({1, 3, 4}, 21), random_leaf({2, 4, 2}, 22), "MatmulBackward0");
  check_product(kMatmul, random_leaf({2, 2, 3, 4}, 23), random_leaf({4, 2}, 24), "MatmulBackward0");
  // A batch that is not contiguous in memory (no folding in the forward).
  check_product(kMatmul, random_leaf({3, 2, 4}, 25).detach().transpose(0, 1).requires_grad_(),
                random_leaf({4, 2}, 26), "MatmulBackward0");
}

TEST_CASE("matmul: transposed and zero-size operands", "[linalg_grad]") {
  check_product(kMatmul, transposed_leaf({3, 4}, 27), transposed_leaf({4, 2}, 28), "MmBackward0",
                true);
  check_product(kMatmul, transposed_leaf({2, 3, 4}, 29), random_leaf({4, 2}, 30),
                "MatmulBackward0");
  check_product(kMatmul, random_leaf({3, 0}, 31), random_leaf({0, 2}, 32), "MmBackward0");
  check_product(kMatmul, random_leaf({0}, 33), random_leaf({0}, 34), "DotBackward0");
  check_product(kMatmul, random_leaf({0, 4}, 35), random_leaf({4, 2}, 36), "MmBackward0");
  check_product(kMatmul, random_leaf({0, 3, 4}, 37), random_leaf({4, 2}, 38), "MatmulBackward0");
  check_product(kMatmul, random_leaf({2, 3, 0}, 39), random_leaf({2, 0, 2}, 40), "MatmulBackward0");
  // k = 0: the product is zeros and so are the (empty) gradients.
  const Tensor a = random_leaf({3, 0}, 41);
  const Tensor b = random_leaf({0, 2}, 42);
  const std::vector<Tensor> g = autograd::grad({sum(matmul(a, b))}, {a, b});
  CHECK(g[0].sizes() == Shape{3, 0});
  CHECK(g[1].sizes() == Shape{0, 2});
}

TEST_CASE("matmul: only the operand that requires grad gets one", "[linalg_grad]") {
  const Tensor a = random_leaf({3, 4}, 43);
  const Tensor b = random_leaf({4, 2}, 44).detach();
  const Tensor out = matmul(a, b);
  CHECK(out.requires_grad());
  sum(out).backward();
  CHECK(a.grad().sizes() == a.sizes());
  CHECK_FALSE(b.grad().defined());
  // A float32 operand that needs no gradient promotes the product to float64.
  const Tensor c = random_leaf({4, 2}, 45).detach().to(kFloat32);
  CHECK(matmul(a, c).dtype() == kFloat64);
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return matmul(in[0], c); }, {a}));
}

TEST_CASE("mm and bmm: gradients and second derivatives", "[linalg_grad]") {
  const BinaryFn mm_fn = [](const Tensor& a, const Tensor& b) { return mm(a, b); };
  const BinaryFn bmm_fn = [](const Tensor& a, const Tensor& b) { return bmm(a, b); };
  check_product(mm_fn, random_leaf({3, 4}, 46), random_leaf({4, 2}, 47), "MmBackward0", true);
  check_product(mm_fn, transposed_leaf({3, 4}, 48), transposed_leaf({4, 2}, 49), "MmBackward0",
                true);
  check_product(mm_fn, random_leaf({3, 0}, 50), random_leaf({0, 2}, 51), "MmBackward0");
  check_product(bmm_fn, random_leaf({2, 3, 4}, 52), random_leaf({2, 4, 2}, 53), "BmmBackward0",
                true);
  check_product(bmm_fn, transposed_leaf({2, 3, 4}, 54), transposed_leaf({2, 4, 2}, 55),
                "BmmBackward0", true);
  check_product(bmm_fn, random_leaf({0, 3, 4}, 56), random_leaf({0, 4, 2}, 57), "BmmBackward0");
  check_product(bmm_fn, random_leaf({2, 3, 0}, 58), random_leaf({2, 0, 2}, 59), "BmmBackward0");
}

TEST_CASE("linear: gradients of input, weight and bias", "[linalg_grad]") {
  const Tensor w = random_leaf({2, 4}, 60);
  const Tensor bias = random_leaf({2}, 61);
  for (const Tensor& x : {random_leaf({4}, 62), random_leaf({3, 4}, 63), random_leaf({2, 3, 4}, 64),
                          transposed_leaf({3, 4}, 65)}) {
    INFO("x " << x.sizes());
    const Tensor out = linear(x, w, bias);
    CHECK(out.requires_grad());
    // Product and bias are one node (parts: a product and an AddBackward0 without a bias).
    REQUIRE(out.grad_fn() != nullptr);
    CHECK(out.grad_fn()->name() == "LinearBackward0");
    CHECK(gradgradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                        {x, w, bias}));
    CHECK(allclose(out.detach(), linear(x.detach(), w.detach(), bias.detach()), 1e-12, 1e-12));
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                    {x, w, bias}));
    CHECK(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w}));
  }
  // A bias that is not [out_features] broadcasts through the parts, as an add.
  const Tensor row_bias = random_leaf({1, 2}, 75);
  const Tensor x2 = random_leaf({3, 4}, 76);
  CHECK(linear(x2, w, row_bias).grad_fn()->name() == "AddBackward0");
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                  {x2, w, row_bias}));
  // Only the bias requires grad.
  const Tensor x = random_leaf({3, 4}, 66).detach();
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return linear(x, w.detach(), in[0]); },
                  {bias}));
}

TEST_CASE("linear algebra records nothing when nothing requires grad", "[linalg_grad]") {
  const Tensor a = random_leaf({2, 3, 4}, 67).detach();
  const Tensor b = random_leaf({2, 4, 2}, 68).detach();
  const Tensor w = random_leaf({2, 4}, 69).detach();
  for (const Tensor& r : {matmul(a, b), bmm(a, b), mm(a.select(0, 0), b.select(0, 0)),
                          linear(a, w, w.select(1, 0))}) {
    CHECK_FALSE(r.requires_grad());
    CHECK(r.grad_fn() == nullptr);
  }
  const Tensor leaf = random_leaf({3, 4}, 70);
  NoGradGuard no_grad;
  const Tensor r = matmul(leaf, leaf.t());
  CHECK_FALSE(r.requires_grad());
  CHECK(r.grad_fn() == nullptr);
}

TEST_CASE("linear algebra that records raises the same errors", "[linalg_grad]") {
  const Tensor a = random_leaf({3, 4}, 71);
  const Tensor b = random_leaf({3, 2}, 72);
  CHECK_THROWS_WITH(matmul(a, b), Catch::Contains("[matmul]"));
  CHECK_THROWS_WITH(mm(a, b), Catch::Contains("[mm]"));
  CHECK_THROWS_WITH(bmm(a, b), Catch::Contains("[bmm]"));
  CHECK_THROWS_WITH(linear(a, b), Catch::Contains("[linear]"));
}

}  // namespace
}  // namespace tessera::autograd_test
