// Entry points of the elementwise family: validate, promote (Note [Result type]), broadcast,
// allocate, then call the device's unary / binary / where / clamp kernel.
//
// Note [Scalar operands]
// A Scalar takes part in promotion as a Python number, then becomes one element of the compute
// dtype viewed with stride 0 in every dim of the output shape (a 0-dim tensor, expanded); the
// kernels have a fast path for stride 0. Inputs of another dtype are converted before the kernel
// runs (t.to(dtype)), so kernels see one dtype.

#include <array>
#include <initializer_list>
#include <string>

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"
#include "tessera/runtime/ops/promotion.h"

namespace tessera {

namespace {

enum class BinaryKind { arith, true_div, compare };

BinaryKind binary_kind(BinaryOp op) {
  switch (op) {
#define TS_CASE(e, name, kind) \
  case BinaryOp::e:            \
    return BinaryKind::kind;
    TS_FOR_EACH_BINARY_OP(TS_CASE)
#undef TS_CASE
  }
  return BinaryKind::arith;
}

// The name a binary op's variant has in the sharding-rule registry: "add" (tensor, tensor),
// "add_" (in place), "add.scalar" (tensor, scalar), "add.rscalar" (scalar, tensor), "add_.scalar".
enum class Variant { kTensor, kInPlace, kScalar, kReverseScalar, kInPlaceScalar };

const char* dist_name(BinaryOp op, Variant variant) {
  constexpr size_t kOps = 0
#define TS_COUNT(e, name, kind) +1
      TS_FOR_EACH_BINARY_OP(TS_COUNT)
#undef TS_COUNT
      ;
  static const auto names = [] {
    std::array<std::array<std::string, 5>, kOps> n;
    for (size_t i = 0; i < kOps; ++i) {
      const std::string base = op_name(static_cast<BinaryOp>(i));
      n[i] = {base, base + "_", base + ".scalar", base + ".rscalar", base + "_.scalar"};
    }
    return n;
  }();
  return names[static_cast<size_t>(op)][static_cast<size_t>(variant)].c_str();
}

bool unary_is_floating(UnaryOp op) {
  switch (op) {
#define TS_CASE(e, name, floating) \
  case UnaryOp::e:                 \
    return floating;
    TS_FOR_EACH_UNARY_OP(TS_CASE)
#undef TS_CASE
  }
  return false;
}

// Names an op in errors, with a trailing "_" for its in-place form.
struct OpLabel {
  const char* name;
  bool inplace;
};
std::ostream& operator<<(std::ostream& os, OpLabel l) {
  return os << l.name << (l.inplace ? "_" : "");
}

DType compute_dtype(BinaryOp op, DType result) {
  if (binary_kind(op) == BinaryKind::true_div && !is_floating_point(result)) {
    return default_float_dtype();
  }
  return result;
}

DType output_dtype(BinaryOp op, DType compute) {
  return binary_kind(op) == BinaryKind::compare ? kBool : compute;
}

// PyTorch's dtype rules beyond promotion; a and b are the operands' dtypes (a Scalar's natural
// dtype), result the promoted dtype.
void check_binary_dtypes(BinaryOp op, OpLabel label, DType a, DType b, DType result) {
  if (op == BinaryOp::kSub) {
    TS_CHECK_DTYPE(a != kBool && b != kBool, "[", label,
                   "] subtraction with a bool operand is not supported (got ", a, " and ", b,
                   "); use logical_xor, or logical_not to invert a mask");
  }
  if (op == BinaryOp::kPow) {
    TS_CHECK_DTYPE(result != kBool, "[", label, "] is not supported for bool operands (got ", a,
                   " and ", b, "); convert them to an integral or floating dtype");
  }
}

void check_alpha(OpLabel label, DType result, const Scalar& alpha) {
  TS_CHECK_DTYPE(!(is_integral(result, true) && alpha.is_floating_point()), "[", label,
                 "] for integral input tensors (result ", result,
                 "), alpha must not be a floating point number, got ", alpha);
  TS_CHECK_DTYPE(!alpha.is_bool() || result == kBool, "[", label,
                 "] boolean alpha is only supported for bool results, got result ", result);
}

// The device all operands run on; a 0-dim CPU tensor may join tensors of another device.
Device common_device(OpLabel label, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (t->dim() == 0 && t->device().is_cpu()) continue;
    if (first == nullptr) {
      first = t;
    } else {
      TS_CHECK_T(DeviceError, t->device() == first->device(), "[", label,
                 "] expected all tensors on the same device, got ", first->device(), " and ",
                 t->device());
    }
  }
  if (first != nullptr) return first->device();
  // Only 0-dim CPU tensors.
  return Device::cpu();
}

// t converted to dtype and moved to device (only when they differ), expanded to shape.
Tensor prepare(const Tensor& t, DType dtype, Device device, const Shape& shape) {
  Tensor c = t.dtype() == dtype ? t : t.to(dtype);
  if (c.device() != device) c = c.to(device);
  return c.sizes() == shape ? c : c.expand(shape);
}

// See Note [Scalar operands]. Built directly with its expanded geometry: one allocation fewer
// on the path that tiny ops take.
Tensor scalar_operand(const Scalar& s, DType dtype, Device device, const Shape& shape) {
  auto storage = Storage::allocate(element_size(dtype), Device::cpu());
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    *static_cast<T*>(storage->data()) = s.to<T>();
  });
  if (!device.is_cpu()) {
    return Tensor::make_view(std::move(storage), {}, {}, 0, dtype).to(device).expand(shape);
  }
  return Tensor::make_view(std::move(storage), shape, Shape(shape.size(), 0), 0, dtype);
}

Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType compute, Device device,
                  const Shape& shape) {
  Tensor out = Tensor::make_empty(shape, output_dtype(op, compute), device);
  if (out.numel() == 0) return out;
  kernels_for(out, op_name(op))
      .binary(op, out, prepare(a, compute, device, shape), prepare(b, compute, device, shape));
  return out;
}

void check_pow_exponent(OpLabel label, DType base, const Scalar& exponent) {
  TS_CHECK_DTYPE(
      !(is_integral(base, true) && !exponent.is_floating_point() && exponent.to_int64() < 0), "[",
      label, "] integers to negative integer powers are not allowed (", base, " base, exponent ",
      exponent, ")");
}

// Whether self and other view exactly the same elements in the same order.
bool same_geometry(const Tensor& self, const Tensor& other) {
  return self.storage() == other.storage() && self.storage_offset() == other.storage_offset() &&
         self.sizes() == other.sizes() && self.strides() == other.strides();
}

// Checks self = op(self, other) for an `other` already on self's device class, with out_dtype
// the dtype op computes; returns the device it runs on.
Device check_inplace_args(BinaryOp op, const Tensor& self, const Tensor& other, DType out_dtype) {
  const OpLabel label{op_name(op), true};
  TS_CHECK_DTYPE(can_cast(out_dtype, self.dtype()), "[", label, "] result type ", out_dtype,
                 " can't be cast to the desired output type ", self.dtype());
  if (other.sizes() != self.sizes()) {
    const Shape shape = broadcast_shapes(self.sizes(), other.sizes(), op_name(op));
    TS_CHECK_SHAPE(shape == self.sizes(), "[", label, "] output with shape ", self.sizes(),
                   " doesn't match the broadcast shape ", shape, " of ", self.sizes(), " and ",
                   other.sizes());
  }
  detail::check_writable(self, dist_name(op, Variant::kInPlace));
  const Device device = common_device(label, {&self, &other});
  TS_CHECK_T(DeviceError, device == self.device(), "[", label, "] cannot write a result on ",
             other.device(), " into a tensor on ", self.device());
  return device;
}

// self = op(self, other) computed in `compute`, after check_inplace_args.
Tensor& binary_inplace(BinaryOp op, Tensor& self, const Tensor& other, DType compute,
                       Device device) {
  if (self.numel() == 0) return self;
  const DType out_dtype = output_dtype(op, compute);
  // Reading other while writing self is safe only when they do not overlap or overlap exactly.
  const bool aliased = other.is_alias_of(self) && !same_geometry(self, other);
  if (compute == self.dtype() && out_dtype == self.dtype() && !aliased) {
    kernels_for(self, op_name(op))
        .binary(op, self, self, prepare(other, compute, device, self.sizes()));
    self.storage()->bump_version();
  } else {
    self.copy_(run_binary(op, self, other, compute, device, self.sizes()));
  }
  return self;
}

Tensor& binary_inplace_scalar(BinaryOp op, Tensor& self, const Scalar& s) {
  if (any_distributed(self)) {
    distributed_op(dist_name(op, Variant::kInPlaceScalar), {self}, {.reals = {s.to_double()}},
                   [op, s](const LocalCall& c) {
                     Tensor local = c.in[0];
                     binary_inplace_scalar(op, local, s);
                     return std::vector{local};
                   });
    return self;
  }
  const OpLabel label{op_name(op), true};
  TS_CHECK(self.defined(), "[", label, "] undefined tensor argument");
  const DType result = result_type(self, s);
  check_binary_dtypes(op, label, self.dtype(), s.natural_dtype(), result);
  if (op == BinaryOp::kPow) check_pow_exponent(label, self.dtype(), s);
  const DType compute = compute_dtype(op, result);
  const Tensor other = scalar_operand(s, compute, self.device(), self.sizes());
  const Device device = check_inplace_args(op, self, other, output_dtype(op, compute));
  if (any_requires_grad(self))
    return grad_hooks<ElementwiseGradHooks>().binary_scalar_(op, self, s);
  return binary_inplace(op, self, other, compute, device);
}

// a + alpha * b (sub: a - alpha * b).
Tensor add_with_alpha(BinaryOp op, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (any_distributed(a, b)) {
    return distributed_op(op_name(op), {a, b}, {.reals = {alpha.to_double()}},
                          [op, alpha](const LocalCall& c) {
                            return std::vector{add_with_alpha(op, c.in[0], c.in[1], alpha)};
                          });
  }
  if (alpha.is_integral() && alpha.to_int64() == 1) return binary_op(op, a, b);
  const OpLabel label{op_name(op), false};
  TS_CHECK(a.defined() && b.defined(), "[", label, "] undefined tensor argument");
  const DType result = result_type(a, b);
  check_binary_dtypes(op, label, a.dtype(), b.dtype(), result);
  check_alpha(label, result, alpha);
  if (alpha.to_double() == 1.0) return binary_op(op, a, b);
  // Scale in the result dtype (float for Half/BFloat16, as PyTorch's op-math) so that alpha cannot
  // promote further, then round once.
  const DType math = is_reduced_float(result) ? kFloat32 : result;
  const Tensor scaled = mul(b.to(math), scalar_operand(alpha, math, b.device(), b.sizes()));
  return binary_op(op, a.to(math), scaled).to(result);
}

}  // namespace

Tensor detail::binary_scalar(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first) {
  if (any_distributed(a)) {
    return distributed_op(dist_name(op, scalar_first ? Variant::kReverseScalar : Variant::kScalar),
                          {a}, {.reals = {s.to_double()}},
                          [op, s, scalar_first](const LocalCall& c) {
                            return std::vector{binary_scalar(op, c.in[0], s, scalar_first)};
                          });
  }
  if (any_requires_grad(a) && binary_kind(op) != BinaryKind::compare) {
    return grad_hooks<ElementwiseGradHooks>().binary_scalar(op, a, s, scalar_first);
  }
  const OpLabel label{op_name(op), false};
  TS_CHECK(a.defined(), "[", label, "] undefined tensor argument");
  const DType result = result_type(a, s);
  if (scalar_first) {
    check_binary_dtypes(op, label, s.natural_dtype(), a.dtype(), result);
  } else {
    check_binary_dtypes(op, label, a.dtype(), s.natural_dtype(), result);
    if (op == BinaryOp::kPow) check_pow_exponent(label, a.dtype(), s);
  }
  const DType compute = compute_dtype(op, result);
  const Tensor st = scalar_operand(s, compute, a.device(), a.sizes());
  return scalar_first ? run_binary(op, st, a, compute, a.device(), a.sizes())
                      : run_binary(op, a, st, compute, a.device(), a.sizes());
}

// ---- generic ----

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (any_distributed(a, b)) {
    return distributed_op(dist_name(op, Variant::kTensor), {a, b}, {}, [op](const LocalCall& c) {
      return std::vector{binary_op(op, c.in[0], c.in[1])};
    });
  }
  if (any_requires_grad(a, b) && binary_kind(op) != BinaryKind::compare) {
    return grad_hooks<ElementwiseGradHooks>().binary(op, a, b);
  }
  const OpLabel label{op_name(op), false};
  TS_CHECK(a.defined() && b.defined(), "[", label, "] undefined tensor argument");
  const Device device = common_device(label, {&a, &b});
  const DType result = result_type(a, b);
  check_binary_dtypes(op, label, a.dtype(), b.dtype(), result);
  const DType compute = compute_dtype(op, result);
  if (a.sizes() == b.sizes()) return run_binary(op, a, b, compute, device, a.sizes());
  return run_binary(op, a, b, compute, device, broadcast_shapes(a.sizes(), b.sizes(), label.name));
}

Tensor& binary_op_(BinaryOp op, Tensor& self, const Tensor& other) {
  if (any_distributed(self, other)) {
    distributed_op(dist_name(op, Variant::kInPlace), {self, other}, {}, [op](const LocalCall& c) {
      Tensor local = c.in[0];
      binary_op_(op, local, c.in[1]);
      return std::vector{local};
    });
    return self;
  }
  const OpLabel label{op_name(op), true};
  TS_CHECK(self.defined() && other.defined(), "[", label, "] undefined tensor argument");
  const DType result = result_type(self, other);
  check_binary_dtypes(op, label, self.dtype(), other.dtype(), result);
  const DType compute = compute_dtype(op, result);
  const Device device = check_inplace_args(op, self, other, output_dtype(op, compute));
  if (any_requires_grad(self, other)) {
    return grad_hooks<ElementwiseGradHooks>().binary_(op, self, other);
  }
  return binary_inplace(op, self, other, compute, device);
}

Tensor unary_op(UnaryOp op, const Tensor& a) {
  if (any_distributed(a)) {
    return distributed_op(op_name(op), {a}, {},
                          [op](const LocalCall& c) { return std::vector{unary_op(op, c.in[0])}; });
  }
  if (any_requires_grad(a) && op != UnaryOp::kLogicalNot) {
    return grad_hooks<ElementwiseGradHooks>().unary(op, a);
  }
  const char* name = op_name(op);
  TS_CHECK(a.defined(), "[", name, "] undefined tensor argument");
  const DType in = a.dtype();
  DType dtype = in;
  switch (op) {
    case UnaryOp::kNeg:
      TS_CHECK_DTYPE(in != kBool,
                     "[neg] negation, the `-` operator, on a bool tensor is not "
                     "supported; use logical_not to invert a mask");
      break;
    case UnaryOp::kAbs:
    case UnaryOp::kRelu:
      TS_CHECK_DTYPE(in != kBool, "[", name, "] is not supported for bool tensors");
      break;
    case UnaryOp::kGelu:
    case UnaryOp::kSilu:
      TS_CHECK_DTYPE(is_floating_point(in), "[", name, "] expects a floating-point tensor, got ",
                     in);
      break;
    case UnaryOp::kLogicalNot:
      dtype = kBool;
      break;
    default:
      if (unary_is_floating(op) && !is_floating_point(in)) dtype = default_float_dtype();
      break;
  }
  Tensor out = Tensor::make_empty(a.sizes(), dtype, a.device());
  if (out.numel() == 0) return out;
  kernels_for(a, name).unary(op, out, in == dtype ? a : a.to(dtype));
  return out;
}

// ---- named ops ----

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (any_distributed(a, b)) return add_with_alpha(BinaryOp::kAdd, a, b, alpha);
  if (any_requires_grad(a, b)) return grad_hooks<ElementwiseGradHooks>().add(a, b, alpha);
  return add_with_alpha(BinaryOp::kAdd, a, b, alpha);
}
Tensor add(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kAdd, a, b, false);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (any_distributed(a, b)) return add_with_alpha(BinaryOp::kSub, a, b, alpha);
  if (any_requires_grad(a, b)) return grad_hooks<ElementwiseGradHooks>().sub(a, b, alpha);
  return add_with_alpha(BinaryOp::kSub, a, b, alpha);
}
Tensor sub(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kSub, a, b, false);
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kMul, a, b); }
Tensor mul(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kMul, a, b, false);
}
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kDiv, a, b); }
Tensor div(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kDiv, a, b, false);
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kPow, a, b); }
Tensor pow(const Tensor& a, const Scalar& exponent) {
  return detail::binary_scalar(BinaryOp::kPow, a, exponent, false);
}
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kMaximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kMinimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kEq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kNe, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kLt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kLe, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kGt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kGe, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kLogicalAnd, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary_op(BinaryOp::kLogicalOr, a, b);
}

Tensor logical_not(const Tensor& a) { return unary_op(UnaryOp::kLogicalNot, a); }
Tensor neg(const Tensor& a) { return unary_op(UnaryOp::kNeg, a); }
Tensor abs(const Tensor& a) { return unary_op(UnaryOp::kAbs, a); }
Tensor exp(const Tensor& a) { return unary_op(UnaryOp::kExp, a); }
Tensor log(const Tensor& a) { return unary_op(UnaryOp::kLog, a); }
Tensor sqrt(const Tensor& a) { return unary_op(UnaryOp::kSqrt, a); }
Tensor rsqrt(const Tensor& a) { return unary_op(UnaryOp::kRsqrt, a); }
Tensor relu(const Tensor& a) { return unary_op(UnaryOp::kRelu, a); }
Tensor silu(const Tensor& a) { return unary_op(UnaryOp::kSilu, a); }
Tensor tanh(const Tensor& a) { return unary_op(UnaryOp::kTanh, a); }
Tensor sigmoid(const Tensor& a) { return unary_op(UnaryOp::kSigmoid, a); }
Tensor erf(const Tensor& a) { return unary_op(UnaryOp::kErf, a); }
Tensor erfc(const Tensor& a) { return unary_op(UnaryOp::kErfc, a); }

Tensor gelu(const Tensor& a, const std::string& approximate) {
  if (any_distributed(a)) {
    return distributed_op(
        "gelu", {a}, {.ints = {approximate == "none" ? 0 : 1}},
        [approximate](const LocalCall& c) { return std::vector{gelu(c.in[0], approximate)}; });
  }
  if (any_requires_grad(a)) return grad_hooks<ElementwiseGradHooks>().gelu(a, approximate);
  if (approximate == "none") return unary_op(UnaryOp::kGelu, a);
  TS_CHECK(approximate == "tanh", "[gelu] approximate must be \"none\" or \"tanh\", got \"",
           approximate, "\"");
  TS_CHECK(a.defined(), "[gelu] undefined tensor argument");
  TS_CHECK_DTYPE(is_floating_point(a.dtype()), "[gelu] expects a floating-point tensor, got ",
                 a.dtype());
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), composed in float for reduced types so that
  // only the result is rounded, as PyTorch's op-math.
  const DType math = is_reduced_float(a.dtype()) ? kFloat32 : a.dtype();
  const Tensor x = a.to(math);
  const Tensor inner = mul(x + mul(x * x * x, 0.044715), 0.7978845608028654);
  return (mul(x, 0.5) * (tanh(inner) + 1.0)).to(a.dtype());
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (any_distributed(cond, a, b)) {
    return distributed_op("where", {cond, a, b}, {}, [](const LocalCall& c) {
      return std::vector{where(c.in[0], c.in[1], c.in[2])};
    });
  }
  if (any_requires_grad(a, b)) return grad_hooks<ElementwiseGradHooks>().where(cond, a, b);
  TS_CHECK(cond.defined() && a.defined() && b.defined(), "[where] undefined tensor argument");
  TS_CHECK_DTYPE(cond.dtype() == kBool,
                 "[where] expected condition to be a bool tensor, got a tensor of dtype ",
                 cond.dtype());
  const OpLabel label{"where", false};
  const Device device = common_device(label, {&cond, &a, &b});
  const DType dtype = result_type(a, b);
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = Tensor::make_empty(shape, dtype, device);
  if (out.numel() == 0) return out;
  kernels_for(out, "where")
      .where(out, prepare(cond, kBool, device, shape), prepare(a, dtype, device, shape),
             prepare(b, dtype, device, shape));
  return out;
}

Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max) {
  if (any_distributed(a)) {
    return distributed_op("clamp", {a}, {}, [min, max](const LocalCall& c) {
      return std::vector{clamp(c.in[0], min, max)};
    });
  }
  if (any_requires_grad(a)) return grad_hooks<ElementwiseGradHooks>().clamp(a, min, max);
  TS_CHECK(a.defined(), "[clamp] undefined tensor argument");
  TS_CHECK(min.has_value() || max.has_value(),
           "[clamp] at least one of 'min' or 'max' must be given");
  TS_CHECK_DTYPE(a.dtype() != kBool, "[clamp] is not supported for bool tensors");
  ResultTypeState state;
  state.add(a);
  if (min) state.add(*min);
  if (max) state.add(*max);
  const DType dtype = state.result();
  Tensor out = Tensor::make_empty(a.sizes(), dtype, a.device());
  if (out.numel() == 0) return out;
  kernels_for(a, "clamp")
      .clamp(out, a.dtype() == dtype ? a : a.to(dtype), min.value_or(0), min.has_value(),
             max.value_or(0), max.has_value());
  return out;
}

// ---- operators ----

Tensor operator+(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kAdd, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kSub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kMul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::kDiv, a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) {
  return detail::binary_scalar(BinaryOp::kAdd, b, a, true);
}
Tensor operator-(const Scalar& a, const Tensor& b) {
  return detail::binary_scalar(BinaryOp::kSub, b, a, true);
}
Tensor operator*(const Scalar& a, const Tensor& b) {
  return detail::binary_scalar(BinaryOp::kMul, b, a, true);
}
Tensor operator/(const Scalar& a, const Tensor& b) {
  return detail::binary_scalar(BinaryOp::kDiv, b, a, true);
}
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kEq, a, b, false);
}
Tensor operator!=(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kNe, a, b, false);
}
Tensor operator<(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kLt, a, b, false);
}
Tensor operator<=(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kLe, a, b, false);
}
Tensor operator>(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kGt, a, b, false);
}
Tensor operator>=(const Tensor& a, const Scalar& b) {
  return detail::binary_scalar(BinaryOp::kGe, a, b, false);
}

// ---- Tensor's in-place operators ----

Tensor& Tensor::operator+=(const Tensor& other) { return binary_op_(BinaryOp::kAdd, *this, other); }
Tensor& Tensor::operator-=(const Tensor& other) { return binary_op_(BinaryOp::kSub, *this, other); }
Tensor& Tensor::operator*=(const Tensor& other) { return binary_op_(BinaryOp::kMul, *this, other); }
Tensor& Tensor::operator/=(const Tensor& other) { return binary_op_(BinaryOp::kDiv, *this, other); }
Tensor& Tensor::operator+=(const Scalar& other) {
  return binary_inplace_scalar(BinaryOp::kAdd, *this, other);
}
Tensor& Tensor::operator-=(const Scalar& other) {
  return binary_inplace_scalar(BinaryOp::kSub, *this, other);
}
Tensor& Tensor::operator*=(const Scalar& other) {
  return binary_inplace_scalar(BinaryOp::kMul, *this, other);
}
Tensor& Tensor::operator/=(const Scalar& other) {
  return binary_inplace_scalar(BinaryOp::kDiv, *this, other);
}

}  // namespace tessera
