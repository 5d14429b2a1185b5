// Gradients of the views, conversions, copies and shape ops (runtime/ops/view_grad.h): grad_fn
// names, storage sharing, gradcheck on contiguous / transposed / zero-size inputs, chains of
// views, second derivatives, in-place rules, and factories honouring requires_grad.

#include <catch2/catch.hpp>

#include "tessera/autograd/autograd_meta.h"
#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using In = std::vector<Tensor>;
using Fn = std::function<Tensor(const In&)>;
using MultiFn = std::function<std::vector<Tensor>(const In&)>;

Tensor leaf(const std::vector<double>& values) {
  Tensor t = from_vector(values, {static_cast<int64_t>(values.size())});
  t.requires_grad_();
  return t;
}

std::string grad_fn_name(const Tensor& t) {
  return t.grad_fn() != nullptr ? t.grad_fn()->name() : std::string("none");
}

bool is_view(const Tensor& t) {
  const autograd::AutogradMeta* meta = autograd::get_autograd_meta(t);
  return meta != nullptr && meta->is_view_;
}

// The views under test, each on an input of rank 3 with sizes >= 2 in dims 1 and 2 (any size,
// zero included, in dim 0), with the grad_fn PyTorch gives it.
struct ViewCase {
  const char* grad_fn;
  Fn fn;
};
std::vector<ViewCase> view_cases() {
  return {
      {"ViewBackward0",
       [](const In& in) {
         return in[0].contiguous().view({-1, 2});
       }},
      {"ViewBackward0", [](const In& in) { return in[0].reshape({-1}); }},
      {"TransposeBackward0", [](const In& in) { return in[0].transpose(0, 2); }},
      {"PermuteBackward0",
       [](const In& in) {
         return in[0].permute({2, -3, 1});
       }},
      {"SliceBackward0", [](const In& in) { return in[0].narrow(1, 1, 1); }},
      {"SliceBackward0", [](const In& in) { return in[0].narrow(-1, 0, 2); }},
      {"SliceBackward0", [](const In& in) { return in[0].slice(2, 0, 3, 2); }},
      {"SliceBackward0", [](const In& in) { return in[0].slice(1, -2, 100); }},
      {"SelectBackward0", [](const In& in) { return in[0].select(1, -1); }},
      {"UnsqueezeBackward0", [](const In& in) { return in[0].unsqueeze(-1); }},
      {"SqueezeBackward0", [](const In& in) { return in[0].unsqueeze(1).squeeze(); }},
      {"SqueezeBackward1", [](const In& in) { return in[0].unsqueeze(2).squeeze(2); }},
      {"ExpandBackward0",
       [](const In& in) {
         return in[0].unsqueeze(1).expand({-1, 3, -1, -1});
       }},
      {"ExpandBackward0",
       [](const In& in) {
         return in[0].narrow(2, 0, 1).expand({2, -1, -1, 4});
       }},
  };
}

TEST_CASE("views record with PyTorch's grad_fn names and share storage", "[view_grad]") {
  Tensor x = random_leaf({2, 3, 4}, 1);
  for (const ViewCase& c : view_cases()) {
    INFO(c.grad_fn);
    Tensor v = c.fn({x});
    CHECK(grad_fn_name(v) == c.grad_fn);
    CHECK(v.requires_grad());
    CHECK(v.is_alias_of(x));
    CHECK(is_view(v));
    Tensor plain = c.fn({x.detach()});
    CHECK(plain.unsafe_impl()->autograd_meta == nullptr);
    CHECK(plain.grad_fn() == nullptr);
    CHECK(equal(plain, v));
  }
  CHECK_THROWS_WITH(x.t(), Catch::Contains("[t]"));
}

TEST_CASE("t, flatten, chunk, split and unbind record through the views they are made of",
          "[view_grad]") {
  Tensor m = random_leaf({3, 4}, 2);
  CHECK(grad_fn_name(m.t()) == "TBackward0");
  Tensor v1 = random_leaf({5}, 3);
  Tensor v1t = v1.t();
  CHECK(grad_fn_name(v1t) == "TBackward0");
  CHECK(v1t.unsafe_impl() != v1.unsafe_impl());
  CHECK(grad_fn_name(flatten(m)) == "ViewBackward0");
  CHECK(grad_fn_name(m.chunk(2, 1)[1]) == "SliceBackward0");
  CHECK(grad_fn_name(m.split({1, 2}, 0)[0]) == "SliceBackward0");
  CHECK(grad_fn_name(m.unbind(1)[3]) == "SelectBackward0");
  // reshape that must copy is not a view.
  Tensor r = m.t().reshape({12});
  CHECK(grad_fn_name(r) == "UnsafeViewBackward0");
  CHECK_FALSE(r.is_alias_of(m));
  CHECK_FALSE(is_view(r));
}

TEST_CASE("gradcheck of every view: contiguous, transposed and zero-size inputs", "[view_grad]") {
  const std::vector<Tensor> inputs = {random_leaf({2, 3, 4}, 4), transposed_leaf({2, 3, 4}, 5),
                                      random_leaf({0, 3, 4}, 6)};
  for (const ViewCase& c : view_cases()) {
    for (const Tensor& x : inputs) {
      INFO(c.grad_fn << " on " << x.sizes() << " contiguous " << x.is_contiguous());
      CHECK(gradcheck(c.fn, {x}));
    }
  }
}

TEST_CASE("gradcheck of t, flatten, chunk, split and unbind", "[view_grad]") {
  const std::vector<Tensor> inputs = {random_leaf({3, 4}, 7), transposed_leaf({3, 4}, 8),
                                      random_leaf({0, 4}, 9)};
  for (const Tensor& x : inputs) {
    INFO(x.sizes() << " contiguous " << x.is_contiguous());
    CHECK(gradcheck([](const In& in) { return in[0].t(); }, {x}));
    CHECK(gradcheck([](const In& in) { return flatten(in[0]); }, {x}));
    CHECK(gradcheck([](const In& in) { return in[0].flatten(1); }, {x}));
    CHECK(gradcheck(MultiFn([](const In& in) { return in[0].chunk(3, 1); }), {x}));
    CHECK(gradcheck(MultiFn([](const In& in) { return in[0].split(3, 1); }), {x}));
    CHECK(gradcheck(MultiFn([](const In& in) { return in[0].split({1, 3}, -1); }), {x}));
    CHECK(gradcheck(MultiFn([](const In& in) { return in[0].unbind(1); }), {x}));
  }
  CHECK(gradcheck([](const In& in) { return in[0].t(); }, {random_leaf({5}, 10)}));
  CHECK(gradcheck([](const In& in) { return in[0].flatten(); }, {random_leaf({}, 11)}));
}

TEST_CASE("chains of views", "[view_grad]") {
  Tensor x = random_leaf({3, 4}, 12);
  Tensor chain = x.t().reshape({2, 6}).narrow(1, 1, 4);
  CHECK(grad_fn_name(chain) == "SliceBackward0");
  CHECK(gradcheck([](const In& in) { return in[0].t().reshape({2, 6}).narrow(1, 1, 4); }, {x}));
  CHECK(gradcheck(
      [](const In& in) {
        return in[0].unsqueeze(0).expand({2, 3, 4}).permute({2, 0, 1}).select(0, 3).slice(1, 0, 3,
                                                                                          2);
      },
      {transposed_leaf({3, 4}, 13)}));
}

TEST_CASE("two views of one leaf both used: gradients accumulate", "[view_grad]") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor out = cat({x.narrow(0, 0, 2), x.narrow(0, 1, 2), x.select(0, 1).unsqueeze(0)});
  out.backward(from_vector<double>({1, 1, 10, 10, 100}, {5}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 111, 10});
  CHECK(gradcheck(
      [](const In& in) {
        return cat({in[0].t(), in[0].transpose(0, 1)}, 1);
      },
      {random_leaf({2, 3}, 14)}));
}

TEST_CASE("gradgradcheck: narrow, select, slice, expand, permute, cat, stack", "[view_grad]") {
  Tensor x = random_leaf({3, 4}, 15);
  Tensor y = random_leaf({2, 4}, 16);
  CHECK(gradgradcheck([](const In& in) { return in[0].narrow(1, 1, 2); }, {x}));
  CHECK(gradgradcheck([](const In& in) { return in[0].select(0, -1); }, {x}));
  CHECK(gradgradcheck([](const In& in) { return in[0].slice(1, 0, 4, 3); }, {x}));
  CHECK(gradgradcheck([](const In& in) { return in[0].unsqueeze(0).expand({2, 3, 4}); }, {x}));
  CHECK(gradgradcheck([](const In& in) { return in[0].permute({1, 0}); }, {x}));
  CHECK(gradgradcheck([](const In& in) { return cat({in[0], in[1]}, 0); }, {x, y}));
  CHECK(gradgradcheck(
      [](const In& in) {
        return stack({in[0], in[1]}, 1);
      },
      {y, random_leaf({2, 4}, 17)}));
}

TEST_CASE("cat and stack: gradcheck, mixed inputs, zero-size and legacy empty inputs",
          "[view_grad]") {
  Tensor a = random_leaf({2, 3}, 18);
  Tensor b = transposed_leaf({4, 3}, 19);
  Tensor c = from_vector<double>({1, 2, 3}, {1, 3});  // does not require grad
  Tensor out = cat({a, c, b});
  CHECK(grad_fn_name(out) == "CatBackward0");
  CHECK(equal(out, cat({a.detach(), c, b.detach()})));
  CHECK(grad_fn_name(cat({c, c})) == "none");
  CHECK(gradcheck([&](const In& in) { return cat({in[0], c, in[1]}, -2); }, {a, b}));
  CHECK(gradcheck(
      [](const In& in) {
        return cat({in[0], in[1]}, 1);
      },
      {random_leaf({3, 0}, 20), random_leaf({3, 2}, 21)}));
  CHECK(gradcheck(
      [](const In& in) {
        return cat({in[0], in[1], in[0]}, 1);
      },
      {random_leaf({2, 1}, 22), random_leaf({0}, 23)}));
  CHECK(gradcheck([](const In& in) { return cat({in[0]}); }, {random_leaf({0, 2}, 24)}));

  Tensor s = stack({a, a.detach(), b.narrow(0, 1, 2)}, -1);
  CHECK(grad_fn_name(s) == "StackBackward0");
  CHECK(gradcheck(
      [](const In& in) {
        return stack({in[0], in[1]}, 0);
      },
      {a, random_leaf({2, 3}, 25)}));
  CHECK(gradcheck(
      [](const In& in) {
        return stack({in[0], in[1]}, 2);
      },
      {transposed_leaf({2, 3}, 26), random_leaf({2, 3}, 27)}));
  CHECK(gradcheck(
      [](const In& in) {
        return stack({in[0], in[0]}, 1);
      },
      {random_leaf({0, 3}, 28)}));
}

TEST_CASE("to(DType), to(Device), clone and contiguous", "[view_grad]") {
  Tensor x = random_leaf({2, 3}, 29);
  CHECK(x.to(kFloat64).unsafe_impl() == x.unsafe_impl());
  CHECK(x.to(Device::cpu()).unsafe_impl() == x.unsafe_impl());
  CHECK(x.contiguous().unsafe_impl() == x.unsafe_impl());

  Tensor f = x.to(kFloat32);
  CHECK(grad_fn_name(f) == "ToCopyBackward0");
  CHECK(f.dtype() == kFloat32);
  f.backward(ones_like(f));
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kFloat64);
  CHECK(x.grad().to_vector<double>() == std::vector<double>(6, 1.0));
  CHECK(gradcheck([](const In& in) { return in[0].to(kFloat32).to(kFloat64); }, {x},
                  {.eps = 1e-3, .atol = 1e-4}));
  // Integer results never require grad.
  CHECK_FALSE(x.to(kInt64).requires_grad());

  Tensor c = x.clone();
  CHECK(grad_fn_name(c) == "CloneBackward0");
  CHECK_FALSE(c.is_alias_of(x));
  CHECK_FALSE(is_view(c));
  CHECK(gradcheck([](const In& in) { return in[0].clone(); }, {transposed_leaf({2, 3}, 30)}));
  CHECK(gradcheck([](const In& in) { return in[0].clone(); }, {random_leaf({0, 3}, 31)}));

  Tensor xt = transposed_leaf({2, 3}, 32);
  Tensor ct = xt.contiguous();
  CHECK(ct.is_contiguous());
  CHECK(grad_fn_name(ct) == "CloneBackward0");
  CHECK(gradcheck([](const In& in) { return in[0].contiguous(); }, {xt}));
  CHECK(grad_fn_name(x.detach().clone()) == "none");
}

TEST_CASE("copy_: the gradient flows to src (reduced and cast back), none into the old value",
          "[view_grad]") {
  // Into a tensor that does not require grad, broadcasting src.
  CHECK(gradcheck(
      [](const In& in) {
        Tensor buf = zeros({2, 3}, kFloat64);
        buf.copy_(in[0]);
        return buf;
      },
      {random_leaf({3}, 33)}));
  // Into a non-leaf: its old value gets zeros.
  Tensor a = random_leaf({2, 3}, 34);
  Tensor b = transposed_leaf({2, 3}, 35);
  CHECK(gradcheck(
      [](const In& in) {
        Tensor y = in[0].clone();
        y.copy_(in[1]);
        return y;
      },
      {a, b}));
  Tensor y = a.clone();
  y.copy_(b);
  CHECK(grad_fn_name(y) == "CopyBackwards");
  y.backward(full({2, 3}, 2.0, kFloat64));
  CHECK(a.grad().to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(b.grad().to_vector<double>() == std::vector<double>(6, 2.0));
  // Across dtypes: the gradient comes back in src's dtype.
  Tensor s = random_leaf({4}, 36);
  Tensor f = zeros({4}, kFloat32);
  f.copy_(s);
  CHECK(f.requires_grad());
  f.backward(ones_like(f));
  CHECK(s.grad().dtype() == kFloat64);
  // Into an integer tensor: nothing to differentiate.
  Tensor i = zeros({4}, kInt64);
  i.copy_(s);
  CHECK_FALSE(i.requires_grad());
  // Without grad, or from a tensor without grad, nothing records.
  Tensor plain = zeros({4}, kFloat64);
  plain.copy_(s.detach());
  CHECK(plain.unsafe_impl()->autograd_meta == nullptr);
  {
    NoGradGuard no_grad;
    plain.copy_(s);
  }
  CHECK_FALSE(plain.requires_grad());
}

TEST_CASE("copy_ and fill_ refuse leaves that require grad and views of tensors that do",
          "[view_grad]") {
  Tensor x = random_leaf({2, 3}, 37);
  CHECK_THROWS_WITH(x.copy_(zeros({2, 3}, kFloat64)),
                    Catch::Contains("[copy_]") && Catch::Contains("leaf"));
  CHECK_THROWS_WITH(x.fill_(1.0), Catch::Contains("[fill_]") && Catch::Contains("leaf"));
  CHECK_THROWS_WITH(x.zero_(), Catch::Contains("[fill_]"));
  CHECK_THROWS_WITH(x.narrow(0, 0, 1).fill_(1.0),
                    Catch::Contains("[fill_]") && Catch::Contains("view"));
  Tensor y = x.clone();
  CHECK_THROWS_WITH(y.narrow(0, 0, 1).copy_(zeros({1, 3}, kFloat64)),
                    Catch::Contains("[copy_]") && Catch::Contains("view"));
  CHECK_THROWS_WITH(y.select(1, 2).fill_(0.0), Catch::Contains("[fill_]"));
  // A reshape that copied is not a view.
  Tensor r = x.t().reshape({6});
  r.fill_(3.0);
  CHECK(grad_fn_name(r) == "FillBackward0");
  // Under NoGradGuard, leaves may be updated in place (as optimizers do).
  {
    NoGradGuard no_grad;
    x.fill_(2.0);
    x.narrow(0, 0, 1).copy_(zeros({1, 3}, kFloat64));
  }
  CHECK(x.to_vector<double>() == std::vector<double>{0, 0, 0, 2, 2, 2});
  CHECK(x.is_leaf());
}

TEST_CASE("in-place arithmetic through a view of a tensor that requires grad raises",
          "[view_grad]") {
  Tensor x = random_leaf({2, 3}, 38);
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(y.narrow(0, 0, 1) += 1.0, Catch::Contains("view"));
}

TEST_CASE("fill_ and zero_ on a non-leaf: the old value gets a zero gradient", "[view_grad]") {
  Tensor x = random_leaf({2, 2}, 39);
  Tensor y = x.clone();
  y.fill_(5.0);
  CHECK(grad_fn_name(y) == "FillBackward0");
  CHECK(y.requires_grad());
  CHECK(y.to_vector<double>() == std::vector<double>(4, 5.0));
  Tensor z = cat({y, x});
  z.backward(ones_like(z));
  CHECK(x.grad().to_vector<double>() == std::vector<double>(4, 1.0));
  CHECK(gradcheck(
      [](const In& in) {
        Tensor w = in[0].clone();
        w.zero_();
        return cat({w, in[0]});
      },
      {x}));
}

TEST_CASE("factories honour requires_grad", "[view_grad]") {
  const TensorOptions rg = TensorOptions().dtype(kFloat64).requires_grad(true);
  const std::vector<Tensor> made = {empty({2}, rg),
                                    zeros({2}, rg),
                                    ones({2}, rg),
                                    full({2}, 3.0, rg),
                                    arange(4.0, rg),
                                    linspace(0, 1, 3, rg),
                                    logspace(0, 1, 3, 10.0, rg),
                                    eye(3, std::nullopt, rg),
                                    zeros({2}, TensorOptions().requires_grad(true))};
  for (const Tensor& t : made) {
    CHECK(t.requires_grad());
    CHECK(t.is_leaf());
  }
  CHECK(eye(2, std::nullopt, rg).to_vector<double>() == std::vector<double>{1, 0, 0, 1});
  CHECK_FALSE(zeros({2}, kFloat64).requires_grad());
  const TensorOptions int_rg = TensorOptions().dtype(kInt64).requires_grad(true);
  CHECK_THROWS_WITH(zeros({2}, int_rg),
                    Catch::Contains("[zeros] only tensors of floating point dtype can require "
                                    "gradients, got int64"));
  CHECK_THROWS_WITH(arange(5, TensorOptions().requires_grad(true)),
                    Catch::Contains("[arange] only tensors of floating point dtype can require "
                                    "gradients, got int64"));
  CHECK_THROWS_WITH(eye(2, std::nullopt, int_rg), Catch::Contains("[eye]"));
  CHECK_THROWS_WITH(empty({1}, int_rg), Catch::Contains("[empty]"));
  CHECK_THROWS_WITH(full({1}, 1, int_rg), Catch::Contains("[full]"));
  CHECK_THROWS_WITH(linspace(0, 1, 2, int_rg), Catch::Contains("[linspace]"));
}

}  // namespace
}  // namespace tessera::autograd_test
