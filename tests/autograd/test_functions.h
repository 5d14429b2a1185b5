#pragma once
// Custom Functions for the autograd tests (test code, not library code). Each backward is built
// from these Functions, so backward records under create_graph and second derivatives work.

#include <any>
#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::autograd_test {

using autograd::AutogradContext;
using autograd::Function;

inline Tensor vec(const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape);
}
inline Tensor leaf(const std::vector<double>& values, const Shape& shape) {
  Tensor t = vec(values, shape);
  t.requires_grad_();
  return t;
}
inline Tensor leaf(const std::vector<double>& values) {
  return leaf(values, Shape{static_cast<int64_t>(values.size())});
}

struct MulFn : Function<MulFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    return mul(a, b);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    std::vector<Tensor> s = ctx->saved();
    return {MulFn::apply(grads[0], s[1]), MulFn::apply(grads[0], s[0])};
  }
};

struct AddFn : Function<AddFn> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& a, const Tensor& b) {
    return add(a, b);
  }
  static std::vector<Tensor> backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
    return {grads[0], grads[0]};
  }
};

struct ScaleFn : Function<ScaleFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, double c) {
    ctx->saved_data["c"] = c;
    return mul(a, c);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {ScaleFn::apply(grads[0], std::any_cast<double>(ctx->saved_data["c"]))};
  }
};

// Saves its output, so its node holds it weakly (see SavedTensor).
struct ExpFn : Function<ExpFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a) {
    Tensor y = exp(a);
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {MulFn::apply(grads[0], ctx->saved()[0])};
  }
};

// A 0-dim g broadcast to `shape`.
struct ExpandFn : Function<ExpandFn> {
  static Tensor forward(AutogradContext* /*ctx*/, const Tensor& g, const Shape& shape) {
    return add(zeros(shape, g.options()), g);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads);
};

struct SumFn : Function<SumFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a) {
    ctx->saved_data["shape"] = a.shape();
    return sum(a);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {ExpandFn::apply(grads[0], std::any_cast<Shape>(ctx->saved_data["shape"]))};
  }
};

inline std::vector<Tensor> ExpandFn::backward(AutogradContext* /*ctx*/, std::vector<Tensor> grads) {
  return {SumFn::apply(grads[0])};
}

struct SquareFn : Function<SquareFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return mul(x, x);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {ScaleFn::apply(MulFn::apply(grads[0], ctx->saved()[0]), 2.0)};
  }
};

// d/dx x^2 deliberately wrong (3x instead of 2x).
struct WrongSquareFn : Function<WrongSquareFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return mul(x, x);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {ScaleFn::apply(MulFn::apply(grads[0], ctx->saved()[0]), 3.0)};
  }
};

inline Tensor cube(const Tensor& x) { return MulFn::apply(SquareFn::apply(x), x); }

// t (any floating dtype) equals `expected` elementwise within a float64 tolerance.
inline void check_values(const Tensor& t, const std::vector<double>& expected) {
  REQUIRE(t.defined());
  const std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-12));
}

}  // namespace tessera::autograd_test
