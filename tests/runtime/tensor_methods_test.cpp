// Tensor methods (API.md §1: x.sum(), x.pow(2), x.matmul(w), ...) equal the free functions of
// runtime/ops.h on the same inputs, default arguments included.

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <utility>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// Same shape, same dtype, exactly equal elements.
bool same(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && tessera::equal(a, b);
}

bool same(const std::pair<Tensor, Tensor>& a, const std::pair<Tensor, Tensor>& b) {
  return same(a.first, b.first) && same(a.second, b.second);
}

struct Inputs {
  Generator gen{1234};
  Tensor x = tessera::randn({3, 4}, {}, &gen);
  Tensor y = tessera::randn({3, 4}, {}, &gen);
  Tensor row = tessera::randn({4}, {}, &gen);                         // broadcasts against x
  Tensor pos = tessera::abs(tessera::randn({3, 4}, {}, &gen)) + 0.5;  // for log/sqrt/pow
  Tensor cond = tessera::gt(x, y);
  Tensor mask = tessera::gt(y, tessera::zeros_like(y));
};

}  // namespace

TEST_CASE("elementwise methods equal the free functions", "[runtime][methods]") {
  Inputs in;
  const Tensor& x = in.x;
  const Tensor& y = in.y;
  const Tensor& p = in.pos;

  CHECK(same(x.add(y), tessera::add(x, y)));
  CHECK(same(x.add(y, 2.5), tessera::add(x, y, 2.5)));
  CHECK(same(x.add(in.row), tessera::add(x, in.row)));
  CHECK(same(x.add(3), tessera::add(x, 3)));
  CHECK(same(x.add(Scalar(1.5)), tessera::add(x, Scalar(1.5))));
  CHECK(same(x.sub(y), tessera::sub(x, y)));
  CHECK(same(x.sub(y, -2), tessera::sub(x, y, -2)));
  CHECK(same(x.sub(4), tessera::sub(x, 4)));
  CHECK(same(x.mul(y), tessera::mul(x, y)));
  CHECK(same(x.mul(0.25), tessera::mul(x, 0.25)));
  CHECK(same(x.div(p), tessera::div(x, p)));
  CHECK(same(x.div(3), tessera::div(x, 3)));
  CHECK(same(p.pow(y), tessera::pow(p, y)));
  CHECK(same(x.pow(2), tessera::pow(x, 2)));
  CHECK(same(p.pow(0.5), tessera::pow(p, 0.5)));
  CHECK(same(x.maximum(y), tessera::maximum(x, y)));
  CHECK(same(x.minimum(y), tessera::minimum(x, y)));
}

TEST_CASE("comparison and logical methods equal the free functions", "[runtime][methods]") {
  Inputs in;
  const Tensor& x = in.x;
  const Tensor& y = in.y;
  const Tensor x2 = x.clone();  // ties, so that eq/le/ge see both outcomes

  CHECK(same(x.eq(y), tessera::eq(x, y)));
  CHECK(same(x.eq(x2), tessera::eq(x, x2)));
  CHECK(same(x.ne(y), tessera::ne(x, y)));
  CHECK(same(x.lt(y), tessera::lt(x, y)));
  CHECK(same(x.le(x2), tessera::le(x, x2)));
  CHECK(same(x.gt(y), tessera::gt(x, y)));
  CHECK(same(x.ge(y), tessera::ge(x, y)));
  CHECK(same(in.cond.logical_and(in.mask), tessera::logical_and(in.cond, in.mask)));
  CHECK(same(in.cond.logical_or(in.mask), tessera::logical_or(in.cond, in.mask)));
  CHECK(same(in.cond.logical_not(), tessera::logical_not(in.cond)));
  CHECK(same(x.logical_not(), tessera::logical_not(x)));
}

TEST_CASE("unary methods equal the free functions", "[runtime][methods]") {
  Inputs in;
  const Tensor& x = in.x;
  const Tensor& p = in.pos;

  CHECK(same(x.neg(), tessera::neg(x)));
  CHECK(same(x.abs(), tessera::abs(x)));
  CHECK(same(x.exp(), tessera::exp(x)));
  CHECK(same(p.log(), tessera::log(p)));
  CHECK(same(p.sqrt(), tessera::sqrt(p)));
  CHECK(same(p.rsqrt(), tessera::rsqrt(p)));
  CHECK(same(x.relu(), tessera::relu(x)));
  CHECK(same(x.gelu(), tessera::gelu(x)));
  CHECK(same(x.gelu("tanh"), tessera::gelu(x, "tanh")));
  CHECK(same(x.silu(), tessera::silu(x)));
  CHECK(same(x.tanh(), tessera::tanh(x)));
  CHECK(same(x.sigmoid(), tessera::sigmoid(x)));
  CHECK(same(x.erf(), tessera::erf(x)));
  CHECK(same(x.erfc(), tessera::erfc(x)));
  // A method on a view (non-contiguous input).
  CHECK(same(x.t().exp(), tessera::exp(x.t())));
}

TEST_CASE("where and clamp methods equal the free functions", "[runtime][methods]") {
  Inputs in;
  const Tensor& x = in.x;
  const Tensor& y = in.y;

  // torch.Tensor.where(condition, other): self where condition holds, other elsewhere.
  CHECK(same(x.where(in.cond, y), tessera::where(in.cond, x, y)));
  CHECK(same(x.where(in.mask, in.row), tessera::where(in.mask, x, in.row)));
  CHECK(same(x.clamp(-0.5), tessera::clamp(x, -0.5)));
  CHECK(same(x.clamp(-0.5, 0.5), tessera::clamp(x, -0.5, 0.5)));
  CHECK(same(x.clamp(std::nullopt, 0.25), tessera::clamp(x, std::nullopt, 0.25)));
  CHECK(same(x.clamp(0), tessera::clamp(x, 0)));
}

TEST_CASE("reduction methods equal the free functions", "[runtime][methods]") {
  Generator gen(99);
  const Tensor x = tessera::randn({3, 4, 5}, {}, &gen);
  const Tensor ints = tessera::randint(-3, 4, {3, 4}, kInt64, &gen);

  CHECK(same(x.sum(), tessera::sum(x)));
  CHECK(same(x.sum({1}), tessera::sum(x, {1})));
  CHECK(same(x.sum({1}, true), tessera::sum(x, {1}, true)));
  CHECK(same(x.sum({0, 2}, false, kFloat64), tessera::sum(x, {0, 2}, false, kFloat64)));
  CHECK(same(ints.sum(), tessera::sum(ints)));
  CHECK(same(x.prod(), tessera::prod(x)));
  CHECK(same(x.prod({2}, true), tessera::prod(x, {2}, true)));
  CHECK(same(x.mean(), tessera::mean(x)));
  CHECK(same(x.mean({-1}), tessera::mean(x, {-1})));
  CHECK(same(x.mean({0, 1}, true), tessera::mean(x, {0, 1}, true)));
  CHECK(same(x.amax(), tessera::amax(x)));
  CHECK(same(x.amax({1}, true), tessera::amax(x, {1}, true)));
  CHECK(same(x.amin(), tessera::amin(x)));
  CHECK(same(x.amin({0, 2}), tessera::amin(x, {0, 2})));
  CHECK(same(x.max(), tessera::max(x)));
  CHECK(same(x.min(), tessera::min(x)));
  CHECK(same(x.max(1), tessera::max(x, 1)));
  CHECK(same(x.max(-1, true), tessera::max(x, -1, true)));
  CHECK(same(x.min(1), tessera::min(x, 1)));
  CHECK(same(x.min(0, true), tessera::min(x, 0, true)));
  CHECK(same(x.argmax(), tessera::argmax(x)));
  CHECK(same(x.argmax(1), tessera::argmax(x, 1)));
  CHECK(same(x.argmax(2, true), tessera::argmax(x, 2, true)));
  CHECK(same(x.argmin(), tessera::argmin(x)));
  CHECK(same(x.argmin(0), tessera::argmin(x, 0)));
  CHECK(same(x.argmin(1, true), tessera::argmin(x, 1, true)));
  CHECK(same(x.var(), tessera::var(x)));
  CHECK(same(x.var({1}), tessera::var(x, {1})));
  CHECK(same(x.var({0, 2}, 0, true), tessera::var(x, {0, 2}, 0, true)));
  CHECK(same(x.norm(), tessera::norm(x)));
  CHECK(same(x.norm(1.0), tessera::norm(x, 1.0)));
  CHECK(same(x.norm(2.0, {1}), tessera::norm(x, 2.0, {1})));
  CHECK(same(x.norm(3.0, {0, 2}, true), tessera::norm(x, 3.0, {0, 2}, true)));
}

TEST_CASE("linear algebra methods equal the free functions", "[runtime][methods]") {
  Generator gen(7);
  const Tensor a = tessera::randn({3, 4}, {}, &gen);
  const Tensor w = tessera::randn({4, 5}, {}, &gen);
  const Tensor v = tessera::randn({4}, {}, &gen);
  const Tensor ba = tessera::randn({2, 3, 4}, {}, &gen);
  const Tensor bb = tessera::randn({2, 4, 5}, {}, &gen);

  CHECK(same(a.matmul(w), tessera::matmul(a, w)));
  CHECK(same(a.matmul(v), tessera::matmul(a, v)));
  CHECK(same(v.matmul(v), tessera::matmul(v, v)));
  CHECK(same(ba.matmul(w), tessera::matmul(ba, w)));
  CHECK(same(a.mm(w), tessera::mm(a, w)));
  const Tensor wt = w.t().contiguous().t();  // a non-contiguous right operand
  CHECK(same(a.mm(wt), tessera::mm(a, wt)));
  CHECK(same(ba.bmm(bb), tessera::bmm(ba, bb)));
}

TEST_CASE("nn methods equal the free functions", "[runtime][methods]") {
  Generator gen(3);
  const Tensor x = tessera::randn({2, 3, 5}, {}, &gen);

  CHECK(same(x.softmax(-1), tessera::softmax(x, -1)));
  CHECK(same(x.softmax(1), tessera::softmax(x, 1)));
  CHECK(same(x.log_softmax(-1), tessera::log_softmax(x, -1)));
  CHECK(same(x.log_softmax(0), tessera::log_softmax(x, 0)));
}
