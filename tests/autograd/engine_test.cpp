// The tape and engine through custom Functions: gradients of chains and diamonds against
// hand-derived formulas, accumulation, retain_graph, autograd::grad, hooks, detach, grad mode.

#include "tessera/autograd/engine.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tessera/runtime/autograd_hooks.h"
#include "tests/autograd/test_functions.h"

namespace tessera::autograd_test {
namespace {

TEST_CASE("chain of Functions", "[autograd]") {
  Tensor x = leaf({0.5, -1.0, 1.5});
  SumFn::apply(ExpFn::apply(SquareFn::apply(x))).backward();
  std::vector<double> expected;
  for (double v : {0.5, -1.0, 1.5}) expected.push_back(2 * v * std::exp(v * v));
  check_values(x.grad(), expected);
  CHECK(x.is_leaf());
  CHECK(x.grad().grad_fn() == nullptr);
  CHECK_FALSE(x.grad().requires_grad());
}

TEST_CASE("diamond: a tensor feeding two paths sums their gradients", "[autograd]") {
  Tensor x = leaf({0.3, 1.2}, Shape{2});
  Tensor c = MulFn::apply(SquareFn::apply(x), ExpFn::apply(x));
  SumFn::apply(c).backward();
  std::vector<double> expected;
  for (double v : {0.3, 1.2}) expected.push_back(2 * v * std::exp(v) + v * v * std::exp(v));
  check_values(x.grad(), expected);
}

TEST_CASE("a tensor used twice by one Function, and grads accumulating across calls",
          "[autograd]") {
  Tensor x = leaf({1.0, 2.0, -3.0}, Shape{3});
  SumFn::apply(MulFn::apply(x, x)).backward();
  check_values(x.grad(), {2.0, 4.0, -6.0});
  SumFn::apply(AddFn::apply(x, x)).backward();
  check_values(x.grad(), {4.0, 6.0, -4.0});
  x.set_grad(Tensor());
  CHECK_FALSE(x.grad().defined());
}

// Returns its input; its backward hands back `kept`, a tensor it also keeps.
struct PassKeptFn : Function<PassKeptFn> {
  static inline Tensor kept;
  static const char* name() { return "PassKeptFn"; }
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& x) { return x.clone(); }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> /*grads*/) {
    return {kept};
  }
};

TEST_CASE("gradients meeting at a node are summed, never into a tensor another holds",
          "[autograd]") {
  // Summed in place where the first gradient is a fresh tensor only the engine holds.
  Tensor x = leaf({0.3, 1.2}, Shape{2});
  Tensor h = ScaleFn::apply(x, 2.0);
  SumFn::apply(MulFn::apply(SquareFn::apply(h), ExpFn::apply(h))).backward();
  std::vector<double> expected;
  for (double v : {0.6, 2.4}) expected.push_back(2.0 * (2 * v * std::exp(v) + v * v * std::exp(v)));
  check_values(x.grad(), expected);

  // The caller's gradient reaches h's node on both paths: it is not written.
  Tensor x2 = leaf({1.0, -2.0}, Shape{2});
  Tensor h2 = ScaleFn::apply(x2, 3.0);
  const Tensor g = full({2}, 0.5, kFloat64);
  AddFn::apply(h2, h2).backward(g);
  check_values(g, {0.5, 0.5});
  check_values(x2.grad(), {3.0, 3.0});

  // A Function's backward returns a tensor it keeps: summing into it would change it.
  PassKeptFn::kept = full({2}, 1.0, kFloat64);
  Tensor x3 = leaf({1.0, -2.0}, Shape{2});
  Tensor h3 = ScaleFn::apply(x3, 1.0);
  SumFn::apply(AddFn::apply(PassKeptFn::apply(h3), ScaleFn::apply(h3, 4.0))).backward();
  check_values(PassKeptFn::kept, {1.0, 1.0});
  check_values(x3.grad(), {5.0, 5.0});
  PassKeptFn::kept = Tensor();
}

TEST_CASE("backward with an explicit gradient on a non-scalar", "[autograd]") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor y = ScaleFn::apply(x, 3.0);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("[backward] grad can be implicitly created only "
                                                  "for scalar outputs, got shape [2, 3]"));
  CHECK_THROWS_WITH(y.backward(ones({3}, kFloat64)),
                    Catch::Contains("[backward] Mismatch in shape"));
  y.backward(full({2, 3}, 2.0, kFloat64));
  check_values(x.grad(), {6, 6, 6, 6, 6, 6});
  CHECK(x.grad().shape() == Shape{2, 3});
}

TEST_CASE("backward on a tensor that does not require grad", "[autograd]") {
  Tensor x = vec({1.0}, Shape{});
  CHECK_THROWS_WITH(x.backward(), Catch::Contains("[backward]"));
  CHECK_THROWS_WITH(SquareFn::apply(x).backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("a second backward needs retain_graph", "[autograd]") {
  Tensor x = leaf({2.0});
  Tensor y = SumFn::apply(SquareFn::apply(x));
  y.backward({}, {.retain_graph = true});
  y.backward();
  check_values(x.grad(), {8.0});
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("[backward] Trying to backward through the "
                                                  "graph a second time") &&
                                      Catch::Contains("retain_graph=true"));
}

TEST_CASE("in-place writes to saved tensors are detected, naming the node", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = SumFn::apply(SquareFn::apply(x));
  const uint64_t v = x.storage()->version();
  x.storage()->bump_version();
  CHECK_THROWS_WITH(
      y.backward(),
      Catch::Contains("[backward] one of the tensors needed for gradient computation "
                      "by tessera::autograd_test::SquareFn has been modified by an "
                      "inplace operation: saved at version " +
                      std::to_string(v) + ", now at version " + std::to_string(v + 1)));

  // A saved output, written through the tensor the user holds.
  Tensor z = leaf({0.5});
  Tensor e = ExpFn::apply(z);
  Tensor loss = SumFn::apply(e);
  e += 1.0;
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("ExpFn has been modified by an inplace"));
}

TEST_CASE("autograd::grad returns gradients without touching .grad()", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor w = leaf({3.0, 4.0});
  Tensor unused = leaf({5.0});
  Tensor a = SquareFn::apply(x);
  Tensor loss = SumFn::apply(MulFn::apply(a, w));
  std::vector<Tensor> g = autograd::grad({loss}, {x, a}, {}, {.retain_graph = true});
  check_values(g[0], {6.0, 16.0});  // 2 x w
  check_values(g[1], {3.0, 4.0});   // w, the gradient at the non-leaf a
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());

  CHECK_THROWS_WITH(autograd::grad({loss}, {unused}, {}, {.retain_graph = true}),
                    Catch::Contains("[grad] One of the differentiated Tensors appears to not have "
                                    "been used in the graph. Set allow_unused=true"));
  std::vector<Tensor> g2 =
      autograd::grad({loss}, {w, unused}, {}, {.retain_graph = true, .allow_unused = true});
  check_values(g2[0], {1.0, 4.0});
  CHECK_FALSE(g2[1].defined());
  CHECK_THROWS_WITH(autograd::grad({loss}, {vec({1.0}, Shape{1})}),
                    Catch::Contains("[grad] One of the differentiated Tensors does not require"));
}

// A node whose backward must not run: autograd::grad runs only what leads to its inputs.
struct MustNotRunFn : Function<MustNotRunFn> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& a) { return a.clone(); }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> /*grads*/) {
    throw std::logic_error("MustNotRunFn::backward ran");
  }
};

TEST_CASE("autograd::grad runs only the nodes that lead to its inputs", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor w = leaf({3.0, 4.0});
  Tensor loss = SumFn::apply(MulFn::apply(x, MustNotRunFn::apply(w)));
  check_values(autograd::grad({loss}, {x}, {}, {.retain_graph = true})[0], {3.0, 4.0});
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("MustNotRunFn::backward ran"));
}

TEST_CASE("hooks see and replace gradients", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor a = SquareFn::apply(x);
  std::vector<double> seen;
  a.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return Tensor();  // keep
  });
  a.register_hook([](const Tensor& g) { return mul(g, 10.0); });
  x.register_hook([](const Tensor& g) { return add(g, 1.0); });
  SumFn::apply(MulFn::apply(a, vec({1.0, -1.0}, Shape{2}))).backward();
  CHECK(seen == std::vector<double>{1.0, -1.0});
  check_values(x.grad(), {10.0 * 2 * 1 + 1, -10.0 * 2 * 2 + 1});
  // autograd::grad applies the leaf's hooks too.
  check_values(autograd::grad({SumFn::apply(ScaleFn::apply(x, 2.0))}, {x})[0], {3.0, 3.0});
  CHECK_THROWS_WITH(vec({1.0}, Shape{1}).register_hook([](const Tensor& g) { return g; }),
                    Catch::Contains("[register_hook]"));
}

TEST_CASE("retain_grad keeps a non-leaf's gradient", "[autograd]") {
  Tensor x = leaf({0.5, 1.0});
  Tensor a = SquareFn::apply(x);
  Tensor b = SquareFn::apply(x);
  a.retain_grad();
  CHECK(a.retains_grad());
  CHECK_FALSE(b.retains_grad());
  SumFn::apply(ExpFn::apply(AddFn::apply(a, b))).backward();
  check_values(a.grad(), {std::exp(0.5), std::exp(2.0)});
  CHECK_FALSE(b.grad().defined());
}

TEST_CASE("detach and NoGradGuard stop recording", "[autograd]") {
  Tensor x = leaf({2.0, 3.0});
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_alias_of(x));
  CHECK_FALSE(SquareFn::apply(d).requires_grad());
  // x * stop_gradient(x^2): d/dx = x^2.
  SumFn::apply(MulFn::apply(x, SquareFn::apply(x).detach())).backward();
  check_values(x.grad(), {4.0, 9.0});

  CHECK(is_grad_enabled());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(is_grad_enabled());
    Tensor y = SquareFn::apply(x);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      EnableGradGuard enable;
      CHECK(SquareFn::apply(x).requires_grad());
    }
    CHECK_FALSE(is_grad_enabled());
  }
  CHECK(is_grad_enabled());
}

TEST_CASE("requires_grad_ and leaf status", "[autograd]") {
  Tensor i = zeros({2}, kInt64);
  CHECK_THROWS_WITH(i.requires_grad_(), Catch::Contains("[requires_grad_] only tensors of floating "
                                                        "point dtype can require gradients, got "
                                                        "int64"));
  i.requires_grad_(false);  // allowed
  Tensor x = leaf({1.0});
  Tensor y = SquareFn::apply(x);
  CHECK(x.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.requires_grad());
  CHECK_THROWS_WITH(y.requires_grad_(false), Catch::Contains("[requires_grad_] you can only change "
                                                             "requires_grad flags of leaf"));
  x.requires_grad_(false);
  CHECK_FALSE(x.requires_grad());
  CHECK(zeros({1}).is_leaf());
}

TEST_CASE("grad_fn exposes the graph", "[autograd]") {
  Tensor x = leaf({1.0});
  Tensor y = MulFn::apply(SquareFn::apply(x), vec({2.0}, Shape{1}));
  REQUIRE(y.grad_fn() != nullptr);
  CHECK_THAT(y.grad_fn()->name(), Catch::Contains("MulFn"));
  const auto& edges = y.grad_fn()->next_edges();
  REQUIRE(edges.size() == 2);
  CHECK_THAT(edges[0].function->name(), Catch::Contains("SquareFn"));
  CHECK_FALSE(edges[1].is_valid());  // the constant
  REQUIRE(edges[0].function->next_edges().size() == 1);
  CHECK(edges[0].function->next_edges()[0].function->name() == "AccumulateGrad");
  CHECK(y.output_nr() == 0);
}

// Returns a gradient of the wrong shape, or the wrong number of gradients.
struct BadShapeFn : Function<BadShapeFn> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& a) { return a.clone(); }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> /*grads*/) {
    return {zeros({2}, kFloat64)};
  }
};
struct BadCountFn : Function<BadCountFn> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& a, const Tensor& b) {
    return add(a, b);
  }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    return {grads[0]};
  }
};

TEST_CASE("gradients a backward returns are checked", "[autograd]") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  CHECK_THROWS_WITH(SumFn::apply(BadShapeFn::apply(x)).backward(),
                    Catch::Contains("BadShapeFn returned an invalid gradient at index 0 - got [2] "
                                    "but expected shape compatible with [3]"));
  CHECK_THROWS_WITH(SumFn::apply(BadCountFn::apply(x, x)).backward(),
                    Catch::Contains("returned an incorrect number of gradients (expected 2, got "
                                    "1)"));
}

TEST_CASE("autograd::backward over several roots", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor a = SumFn::apply(SquareFn::apply(x));
  Tensor b = ScaleFn::apply(x, 5.0);
  autograd::backward({a, b}, {Tensor(), vec({1.0, 2.0}, Shape{2})});
  check_values(x.grad(), {2.0 + 5.0, 4.0 + 10.0});
}

TEST_CASE("backward from a leaf, long chains, mutable_grad", "[autograd]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor v = vec({3.0, 4.0}, Shape{2});
  x.backward(v);
  v += 1.0;  // .grad() is a copy, not the caller's tensor
  check_values(x.grad(), {3.0, 4.0});
  x.mutable_grad() = Tensor();
  CHECK_FALSE(x.grad().defined());

  // The engine walks the graph iteratively: a long chain cannot overflow the stack.
  Tensor y = x;
  for (int i = 0; i < 5000; ++i) y = ScaleFn::apply(y, i % 2 == 0 ? 2.0 : 0.5);
  SumFn::apply(y).backward();
  check_values(x.grad(), {1.0, 1.0});
}

TEST_CASE("any_requires_grad, the runtime's recording check", "[autograd]") {
  Tensor x = leaf({1.0});
  Tensor c = vec({1.0}, Shape{1});
  CHECK(any_requires_grad(c, x));
  CHECK(any_requires_grad(std::vector<Tensor>{c, x}));
  CHECK(any_requires_grad(Tensor(), SquareFn::apply(x)));
  CHECK_FALSE(any_requires_grad(c, Tensor(), x.detach()));
  NoGradGuard no_grad;
  CHECK_FALSE(any_requires_grad(x));
}

}  // namespace
}  // namespace tessera::autograd_test

namespace tessera::autograd_test {
namespace {

// queue_callback: what data parallel waits for its buckets in, after the last gradient hook.
TEST_CASE("callbacks queued in backward run after every node, in order, once",
          "[autograd][callbacks]") {
  Tensor x = leaf({0.5, -1.0});
  Tensor y = leaf({2.0, 3.0});
  std::vector<std::string> queued, ran;
  x.register_hook([&](const Tensor& g) {
    queued.push_back("x");
    autograd::queue_callback([&] {
      // Both gradients are in when it runs, whichever hook queued first.
      CHECK(x.grad().defined());
      CHECK(y.grad().defined());
      ran.push_back("x");
      autograd::queue_callback([&] { ran.push_back("queued by a callback"); });
    });
    return g;
  });
  y.register_hook([&](const Tensor& g) {
    queued.push_back("y");
    autograd::queue_callback([&] { ran.push_back("y"); });
    return g;
  });
  for (int pass = 0; pass < 2; ++pass) {  // each pass queues its own
    queued.clear();
    ran.clear();
    SumFn::apply(MulFn::apply(SquareFn::apply(x), y)).backward();
    REQUIRE(queued.size() == 2);
    CHECK(ran == std::vector<std::string>{queued[0], queued[1], "queued by a callback"});
  }
}

TEST_CASE("queue_callback outside backward, and a failing pass drops its callbacks",
          "[autograd][callbacks]") {
  CHECK_THROWS_WITH(autograd::queue_callback([] {}),
                    Catch::Contains("[queue_callback] called outside a backward pass"));
  Tensor x = leaf({1.0, 2.0});
  int ran = 0;
  bool fail = true;
  x.register_hook([&](const Tensor& g) {
    autograd::queue_callback([&] { ++ran; });
    if (fail) throw Error("hook failed");
    return g;
  });
  CHECK_THROWS_WITH(SumFn::apply(x).backward(), Catch::Contains("hook failed"));
  CHECK(ran == 0);
  fail = false;
  SumFn::apply(x).backward();
  CHECK(ran == 1);  // this pass's callback only: the failed pass's is gone
  // A callback's exception reaches the caller of backward.
  Tensor z = leaf({1.0});
  z.register_hook([](const Tensor& g) {
    autograd::queue_callback([] { throw Error("callback failed"); });
    return g;
  });
  CHECK_THROWS_WITH(SumFn::apply(z).backward(), Catch::Contains("callback failed"));
}

}  // namespace
}  // namespace tessera::autograd_test
