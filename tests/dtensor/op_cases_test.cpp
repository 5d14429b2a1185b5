// The op table of tests/dtensor/op_cases.h, and the coverage test: every op of the sharding
// registry has an entry here, and a sharding rule or a stated reason to be replicate-only.

#include "tests/dtensor/op_cases.h"

#include <algorithm>
#include <set>

#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {

namespace {

using In = std::vector<Tensor>;
using K = InputKind;

const Shape kMat{5, 3};  // uneven on 2, 3 and 4 ranks
const Shape kRow{1, 3};  // broadcasts against kMat
const Shape kEven{6, 4};

InputSpec v(Shape s) { return {K::kValue, std::move(s)}; }
InputSpec small(Shape s) { return {K::kSmall, std::move(s)}; }
InputSpec pos(Shape s) { return {K::kPositive, std::move(s)}; }
InputSpec flag(Shape s) { return {K::kBool, std::move(s)}; }

bool is_compare(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
    case BinaryOp::kLogicalAnd:
    case BinaryOp::kLogicalOr:
      return true;
    default:
      return false;
  }
}

void add_pointwise(std::vector<OpCase>& c) {
  const std::string f = "pointwise";
#define TS_UNARY(e, name, floating)                                                           \
  {                                                                                           \
    const UnaryOp op = UnaryOp::e;                                                            \
    const bool domain = op == UnaryOp::kLog || op == UnaryOp::kSqrt || op == UnaryOp::kRsqrt; \
    const InputSpec in = op == UnaryOp::kLogicalNot ? flag(kMat)                              \
                         : domain                   ? pos(kMat)                               \
                                                    : small(kMat);                                              \
    c.push_back({name,                                                                        \
                 f,                                                                           \
                 {in},                                                                        \
                 [op](const In& x) { return unary_op(op, x[0]); },                            \
                 op != UnaryOp::kLogicalNot && op != UnaryOp::kAbs && op != UnaryOp::kRelu}); \
  }
  TS_FOR_EACH_UNARY_OP(TS_UNARY)
#undef TS_UNARY
  // abs and relu have kinks at 0, where integer inputs sit: their gradients are checked on
  // inputs away from 0.
  c.push_back({"abs", f, {pos(kMat)}, [](const In& x) { return abs(x[0] - 0.5); }});
  c.push_back({"relu", f, {v(kMat)}, [](const In& x) { return relu(x[0] + 0.5); }});
  c.push_back({"gelu", f, {small(kMat)}, [](const In& x) { return gelu(x[0], "tanh"); }});
#define TS_BINARY(e, name, kind)                                                                   \
  {                                                                                                \
    const BinaryOp op = BinaryOp::e;                                                               \
    const bool logical = op == BinaryOp::kLogicalAnd || op == BinaryOp::kLogicalOr;                \
    const InputSpec a = logical ? flag(kMat) : (op == BinaryOp::kPow ? pos(kMat) : v(kMat));       \
    const InputSpec b = logical                ? flag(kRow)                                        \
                        : op == BinaryOp::kDiv ? pos(kRow)                                         \
                        : op == BinaryOp::kPow ? small(kRow)                                       \
                                               : v(kRow);                                          \
    const bool grad = !is_compare(op) && op != BinaryOp::kMaximum && op != BinaryOp::kMinimum;     \
    c.push_back({name, f, {a, b}, [op](const In& x) { return binary_op(op, x[0], x[1]); }, grad}); \
    c.push_back({name, f, {a, a}, [op](const In& x) { return binary_op(op, x[0], x[1]); }, grad}); \
    c.push_back({std::string(name) + "_",                                                          \
                 f,                                                                                \
                 {a, b},                                                                           \
                 [op](const In& x) {                                                               \
                   Tensor self = x[0].clone();                                                     \
                   binary_op_(op, self, x[1]);                                                     \
                   return self;                                                                    \
                 },                                                                                \
                 grad && !logical});                                                               \
  }
  TS_FOR_EACH_BINARY_OP(TS_BINARY)
#undef TS_BINARY
  // maximum / minimum on inputs without ties (their gradient at a tie is split).
  c.push_back(
      {"maximum", f, {v(kMat), v(kMat)}, [](const In& x) { return maximum(x[0], x[1] + 0.25); }});
  c.push_back(
      {"minimum", f, {v(kMat), v(kMat)}, [](const In& x) { return minimum(x[0], x[1] + 0.25); }});
  for (BinaryOp op : {BinaryOp::kMaximum, BinaryOp::kMinimum}) {
    c.push_back({std::string(op_name(op)) + "_", f, {v(kMat), v(kRow)}, [op](const In& x) {
                   Tensor self = x[0].clone();
                   binary_op_(op, self, x[1] + 0.25);
                   return self;
                 }});
  }
  c.push_back({"add", f, {v(kMat), v(kMat)}, [](const In& x) { return add(x[0], x[1], 2.5); }});
  c.push_back({"add", f, {v(kMat), v(kMat)}, [](const In& x) { return add(x[0], x[1], -2); }});
  c.push_back({"sub", f, {v(kMat), v(kRow)}, [](const In& x) { return sub(x[0], x[1], 3); }});
  c.push_back({"add.scalar", f, {v(kMat)}, [](const In& x) { return x[0] + 2.5; }});
  c.push_back({"sub.scalar", f, {v(kMat)}, [](const In& x) { return x[0] - 2.5; }});
  c.push_back({"mul.scalar", f, {v(kMat)}, [](const In& x) { return x[0] * 3; }});
  c.push_back({"div.scalar", f, {v(kMat)}, [](const In& x) { return x[0] / 4; }});
  c.push_back({"pow.scalar", f, {v(kMat)}, [](const In& x) { return pow(x[0], 2); }});
  c.push_back({"eq.scalar", f, {v(kMat)}, [](const In& x) { return x[0] == 3; }, false});
  c.push_back({"ne.scalar", f, {v(kMat)}, [](const In& x) { return x[0] != 3; }, false});
  c.push_back({"lt.scalar", f, {v(kMat)}, [](const In& x) { return x[0] < 3; }, false});
  c.push_back({"le.scalar", f, {v(kMat)}, [](const In& x) { return x[0] <= 3; }, false});
  c.push_back({"gt.scalar", f, {v(kMat)}, [](const In& x) { return x[0] > 3; }, false});
  c.push_back({"ge.scalar", f, {v(kMat)}, [](const In& x) { return x[0] >= 3; }, false});
  c.push_back({"add.rscalar", f, {v(kMat)}, [](const In& x) { return 2.5 + x[0]; }});
  c.push_back({"sub.rscalar", f, {v(kMat)}, [](const In& x) { return 2.5 - x[0]; }});
  c.push_back({"mul.rscalar", f, {v(kMat)}, [](const In& x) { return 3 * x[0]; }});
  c.push_back({"div.rscalar", f, {pos(kMat)}, [](const In& x) { return 4 / x[0]; }});
  const auto in_place_scalar = [&](const char* name, auto apply) {
    c.push_back({name, f, {v(kMat)}, [apply](const In& x) {
                   Tensor self = x[0].clone();
                   apply(self);
                   return self;
                 }});
  };
  in_place_scalar("add_.scalar", [](Tensor& t) { t += 2.5; });
  in_place_scalar("sub_.scalar", [](Tensor& t) { t -= 2.5; });
  in_place_scalar("mul_.scalar", [](Tensor& t) { t *= 3; });
  in_place_scalar("div_.scalar", [](Tensor& t) { t /= 4; });
  c.push_back({"where", f, {flag(kMat), v(kMat), v(kRow)}, [](const In& x) {
                 return where(x[0], x[1], x[2]);
               }});
  c.push_back({"where", f, {flag(kRow), v(kMat), v(kMat)}, [](const In& x) {
                 return where(x[0], x[1], x[2]);
               }});
  c.push_back({"clamp", f, {v(kMat)}, [](const In& x) { return clamp(x[0] + 0.5, -3, 4); }});
  c.push_back({"to", f, {v(kMat)}, [](const In& x) { return x[0].to(kFloat32); }});
  // On a CPU-only build a DTensor is already on the CPU: to(cpu) returns it (no dispatch); the
  // rule serves CUDA builds.
  c.push_back({"to_device", f, {v(kMat)}, [](const In& x) { return x[0].to(Device::cpu()); }});
  c.push_back({"clone", f, {v(kMat)}, [](const In& x) { return x[0].clone(); }});
  c.push_back({"contiguous", f, {v(kMat)}, [](const In& x) { return x[0].t().contiguous(); }});
  c.push_back({"copy_", f, {v(kMat), v(kRow)}, [](const In& x) {
                 Tensor self = x[0].clone();
                 self.copy_(x[1]);
                 return self;
               }});
  c.push_back({"copy_", f, {v(kMat), v(kMat)}, [](const In& x) {
                 Tensor self = x[0].clone();
                 self.copy_(x[1] * 2);
                 return self;
               }});
  c.push_back({"fill_", f, {v(kMat)}, [](const In& x) {
                 Tensor self = x[0].clone();
                 self.fill_(2.0);
                 return self;
               }});
  c.push_back(
      {"empty_like", f, {v(kMat)}, [](const In& x) { return empty_like(x[0]).fill_(1.5) + x[0]; }});
  c.push_back({"full_like", f, {v(kMat)}, [](const In& x) { return full_like(x[0], 3) * x[0]; }});
  c.push_back({"full_like", f, {v(kMat)}, [](const In& x) { return zeros_like(x[0]) + x[0]; }});
  c.push_back({"full_like", f, {v(kMat)}, [](const In& x) { return ones_like(x[0]) - x[0]; }});
}

void add_reductions(std::vector<OpCase>& c) {
  const std::string f = "reduction";
  for (const Shape& s : {kMat, kEven}) {
    c.push_back({"sum", f, {v(s)}, [](const In& x) { return sum(x[0]); }});
    c.push_back({"sum", f, {v(s)}, [](const In& x) { return sum(x[0], {0}); }});
    c.push_back({"sum", f, {v(s)}, [](const In& x) { return sum(x[0], {-1}, true); }});
    // mean of a DTensor is sum / count.
    c.push_back({"sum", f, {v(s)}, [](const In& x) { return mean(x[0]); }});
    c.push_back({"sum", f, {v(s)}, [](const In& x) { return mean(x[0], {0}); }});
    // Ties (integer inputs) split the gradient evenly; while recording, a sharded reduced dim is
    // gathered first (Note [Partial outputs under autograd]), so the split is the same.
    c.push_back({"amax", f, {v(s)}, [](const In& x) { return amax(x[0], {0}); }});
    c.push_back({"amin", f, {v(s)}, [](const In& x) { return amin(x[0], {1}, true); }});
    c.push_back({"amax", f, {v(s)}, [](const In& x) { return max(x[0]); }});
    c.push_back({"amin", f, {v(s)}, [](const In& x) { return min(x[0]); }});
  }
  c.push_back({"sum", f, {v(kMat)}, [](const In& x) { return sum(x[0], {0}, false, kFloat32); }});
  c.push_back({"prod", f, {small(kMat)}, [](const In& x) { return prod(x[0], {1}); }});
  c.push_back({"var", f, {v(kMat)}, [](const In& x) { return var(x[0], {0}); }});
  c.push_back({"norm", f, {v(kMat)}, [](const In& x) { return norm(x[0], 2.0, {1}); }});
  // Distinct values (a permutation), so that max/argmax have no ties.
  const auto distinct = [](const Tensor& x) {
    ImplicitReplicationGuard replicate_arange;
    return x * 7 + arange(15, kFloat64).view({5, 3});
  };
  c.push_back(
      {"amax", f, {v(kMat)}, [distinct](const In& x) { return amax(distinct(x[0]), {0}); }});
  c.push_back({"max.dim", f, {v(kMat)}, [](const In& x) { return max(x[0], 1).first; }});
  c.push_back(
      {"max.dim", f, {v(kMat)}, [](const In& x) { return max(x[0], 0, true).second; }, false});
  c.push_back({"min.dim", f, {v(kMat)}, [](const In& x) { return min(x[0], 1).first; }});
  c.push_back({"argmax.dim", f, {v(kMat)}, [](const In& x) { return argmax(x[0], 1); }, false});
  c.push_back({"argmin.dim", f, {v(kMat)}, [](const In& x) { return argmin(x[0], 0); }, false});
  c.push_back({"argmax.flat", f, {v(kMat)}, [](const In& x) { return argmax(x[0]); }, false});
  c.push_back({"argmin.flat", f, {v(kMat)}, [](const In& x) { return argmin(x[0]); }, false});
}

void add_matmul(std::vector<OpCase>& c) {
  const std::string f = "matmul";
  c.push_back({"mm", f, {v({5, 4}), v({4, 3})}, [](const In& x) { return mm(x[0], x[1]); }});
  c.push_back(
      {"matmul", f, {v({6, 4}), v({4, 5})}, [](const In& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul", f, {v({5}), v({5, 3})}, [](const In& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul", f, {v({3, 5}), v({5})}, [](const In& x) { return matmul(x[0], x[1]); }});
  c.push_back(
      {"matmul", f, {v({2, 3, 4}), v({4, 5})}, [](const In& x) { return matmul(x[0], x[1]); }});
  c.push_back(
      {"bmm", f, {v({3, 2, 4}), v({3, 4, 2})}, [](const In& x) { return bmm(x[0], x[1]); }});
  c.push_back({"matmul", f, {v({5, 4}), v({3, 4}), v({3})}, [](const In& x) {
                 return linear(x[0], x[1], x[2]);
               }});
}

void add_views(std::vector<OpCase>& c) {
  const std::string f = "view";
  c.push_back({"view", f, {v({8, 3})}, [](const In& x) { return x[0].view({24}); }});
  c.push_back({"view", f, {v({12, 8})}, [](const In& x) { return x[0].view({16, 6}); }});
  c.push_back({"view", f, {v({6, 4})}, [](const In& x) { return x[0].view({2, 3, 4}); }});
  c.push_back({"reshape", f, {v({6, 4})}, [](const In& x) { return x[0].reshape({-1, 6}); }});
  c.push_back({"reshape", f, {v({5, 3})}, [](const In& x) { return x[0].t().reshape({15}); }});
  c.push_back({"reshape", f, {v({5, 3})}, [](const In& x) { return x[0].flatten(); }});
  c.push_back({"reshape", f, {v({5, 1, 3})}, [](const In& x) { return x[0].squeeze(); }});
  c.push_back({"reshape", f, {v({5, 1, 3})}, [](const In& x) { return x[0].squeeze(1); }});
  c.push_back({"transpose", f, {v({5, 3})}, [](const In& x) { return x[0].t(); }});
  c.push_back({"transpose", f, {v({2, 5, 3})}, [](const In& x) { return x[0].transpose(0, 2); }});
  c.push_back({"permute", f, {v({2, 5, 3})}, [](const In& x) { return x[0].permute({2, 0, 1}); }});
  c.push_back({"select", f, {v({5, 3})}, [](const In& x) { return x[0].select(0, 2); }});
  c.push_back({"select", f, {v({5, 3})}, [](const In& x) { return x[0].select(1, -1); }});
  c.push_back({"slice", f, {v({5, 3})}, [](const In& x) { return x[0].slice(0, 1, 5, 2); }});
  c.push_back({"slice", f, {v({5, 3})}, [](const In& x) { return x[0].narrow(1, 1, 2); }});
  c.push_back({"slice", f, {v({5, 3})}, [](const In& x) { return x[0].chunk(2, 0)[1]; }});
  c.push_back({"slice", f, {v({5, 3})}, [](const In& x) { return x[0].split({1, 2}, 1)[1]; }});
  c.push_back({"select", f, {v({5, 3})}, [](const In& x) { return x[0].unbind(1)[2]; }});
  c.push_back({"unsqueeze", f, {v({5, 3})}, [](const In& x) { return x[0].unsqueeze(1); }});
  c.push_back({"expand", f, {v({1, 3})}, [](const In& x) { return x[0].expand({5, 3}); }});
  c.push_back({"expand", f, {v({5, 3})}, [](const In& x) { return x[0].expand({2, 5, 3}); }});
  c.push_back({"cat", f, {v({5, 3}), v({2, 3})}, [](const In& x) { return cat({x[0], x[1]}, 0); }});
  c.push_back({"cat", f, {v({5, 3}), v({5, 2})}, [](const In& x) { return cat({x[0], x[1]}, 1); }});
  c.push_back({"stack", f, {v({5, 3}), v({5, 3})}, [](const In& x) {
                 return stack({x[0], x[1]}, 1);
               }});
}

void add_nn(std::vector<OpCase>& c) {
  const std::string f = "nn";
  c.push_back({"softmax", f, {small(kMat)}, [](const In& x) { return softmax(x[0], 1); }});
  c.push_back({"log_softmax", f, {small(kMat)}, [](const In& x) { return log_softmax(x[0], 0); }});
  c.push_back({"layer_norm", f, {small(kMat), small({3}), small({3})}, [](const In& x) {
                 return layer_norm(x[0], {3}, x[1], x[2]);
               }});
  c.push_back({"rms_norm", f, {small(kMat), small({3})}, [](const In& x) {
                 return rms_norm(x[0], {3}, x[1]);
               }});
  c.push_back({"embedding", f, {v({6, 3}), {K::kIndex, {5}}}, [](const In& x) {
                 return embedding(x[0], x[1]);
               }});
  // A vocabulary of 3 rows: on 4 ranks one holds none (the masked Partial's empty part).
  c.push_back({"embedding", f, {v({3, 4}), {K::kIndex, {2, 5}}}, [](const In& x) {
                 return embedding(x[0], x[1]);
               }});
  const InputSpec targets{K::kIndex, {5}};
  c.push_back({"cross_entropy", f, {small(kMat), targets}, [](const In& x) {
                 return cross_entropy(x[0], x[1]);
               }});
  c.push_back({"cross_entropy", f, {small(kMat), targets}, [](const In& x) {
                 return cross_entropy(x[0], x[1], {.reduction = Reduction::None});
               }});
  c.push_back({"cross_entropy", f, {small(kMat), targets}, [](const In& x) {
                 return cross_entropy(x[0], x[1], {.ignore_index = 1, .reduction = Reduction::Sum});
               }});
  c.push_back({"cross_entropy", f, {small(kMat), targets}, [](const In& x) {
                 return cross_entropy(x[0], x[1], {.ignore_index = 2, .label_smoothing = 0.2});
               }});
  c.push_back({"cross_entropy", f, {small({5, 3, 2}), {K::kIndex, {5, 2}}}, [](const In& x) {
                 return cross_entropy(x[0], x[1], {.ignore_index = 0});
               }});
  // Random ops seed first, so that every call (the reference's and each DTensor one) draws the
  // same values; the DTensor result must equal the single-device draw.
  c.push_back({"dropout", f, {v(kMat)}, [](const In& x) { return dropout(x[0], 0.5, false); }});
  c.push_back({"dropout", f, {v({5, 7})}, [](const In& x) {
                 manual_seed(7);
                 return dropout(x[0], 0.3);
               }});
  c.push_back({"dropout", f, {v(kMat)}, [](const In& x) {
                 manual_seed(8);
                 return dropout(x[0].to(kFloat32), 0.6).to(kFloat64);
               }});
  c.push_back({"rand_like",
               f,
               {v({5, 7})},
               [](const In& x) {
                 manual_seed(9);
                 return rand_like(x[0]);
               },
               false});
  c.push_back({"randn_like",
               f,
               {v({5, 7})},
               [](const In& x) {
                 manual_seed(10);
                 return randn_like(x[0].to(kFloat32)).to(kFloat64);
               },
               false});
  c.push_back({"scaled_dot_product_attention",
               f,
               {small({2, 4, 3}), small({2, 5, 3}), small({2, 5, 2})},
               [](const In& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }});
  // [batch, heads, L, E] with an additive mask [L, S], and causal self-attention.
  c.push_back({"scaled_dot_product_attention",
               f,
               {small({2, 3, 4, 2}), small({2, 3, 5, 2}), small({2, 3, 5, 3}), small({4, 5})},
               [](const In& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }});
  c.push_back(
      {"scaled_dot_product_attention",
       f,
       {small({2, 3, 4, 2}), small({2, 3, 4, 2}), small({2, 3, 4, 2})},
       [](const In& x) { return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); }});
}

}  // namespace

std::vector<OpCase> op_cases() {
  std::vector<OpCase> c;
  add_pointwise(c);
  add_reductions(c);
  add_matmul(c);
  add_views(c);
  add_nn(c);
  return c;
}

// Ops without a gradient: comparisons, logical ops and indices. Every other op of the registry
// must have an entry whose gradients the validator checks.
bool not_differentiable(const std::string& op) {
  std::string base = op;
  for (const std::string suffix : {".scalar", ".rscalar", ".dim", ".flat"}) {
    if (base.size() > suffix.size() &&
        base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      base.resize(base.size() - suffix.size());
    }
  }
  if (base.back() == '_') base.pop_back();
  static const std::set<std::string> kNone{"eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                           "logical_or", "logical_not", "argmax", "argmin",
                                           // new values, whatever the input's
                                           "rand_like", "randn_like"};
  return kNone.count(base) == 1;
}

TEST_CASE("sharding registry: every op has a rule or a stated reason, and a test entry",
          "[dtensor][ops][coverage]") {
  std::set<std::string> covered;
  std::set<std::string> grad_checked;
  for (const OpCase& c : op_cases()) {
    covered.insert(c.op);
    if (c.grad) grad_checked.insert(c.op);
  }
  std::vector<std::string> missing_entry;
  std::vector<std::string> replicate_only;
  for (const std::string& op : sharding_op_names()) {
    if (covered.count(op) == 0) missing_entry.push_back(op);
    if (covered.count(op) == 1 && grad_checked.count(op) == 0 && !not_differentiable(op)) {
      FAIL_CHECK("no entry of " << op << " checks its gradient, and it is not marked "
                                << "non-differentiable");
    }
    if (grad_checked.count(op) == 1 && not_differentiable(op)) {
      FAIL_CHECK(op << " is marked non-differentiable but an entry checks its gradient");
    }
    const std::string reason = replicate_only_reason(op);
    if (!reason.empty()) replicate_only.push_back(op + ": " + reason);
  }
  const std::vector<std::string> names = sharding_op_names();
  for (const std::string& op : covered) {
    if (std::find(names.begin(), names.end(), op) == names.end()) {
      FAIL_CHECK("the test table names '" << op << "', which is not in the registry");
    }
  }
  std::string listing;
  for (const std::string& r : replicate_only) listing += "\n  " + r;
  INFO("replicate-only ops (" << replicate_only.size() << "):" << listing);
  CHECK(missing_entry.empty());
  for (const std::string& op : missing_entry) FAIL_CHECK("no test entry for " << op);
}

}  // namespace tessera::dtensor_test
