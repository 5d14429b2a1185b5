// Random factories (rand, randn, randint) and dropout: validate, reserve Philox counters from the
// generator, and fill through the device's kernels. See Note [Philox counter layout] in
// kernels/cpu/random.cpp for which counter feeds which element. The factories honour
// options.requires_grad (a leaf; floating dtypes only); dropout of an input that requires grad
// records through runtime/ops/nn_grad.h.

#include <cmath>
#include <limits>
#include <utility>

#include "runtime/dispatch.h"
#include "runtime/distributed.h"
#include "runtime/ops.h"
#include "runtime/ops/nn_grad.h"
#include "runtime/ops/nn_internal.h"

namespace tessera {

namespace {

// Reserves the counters a fill of n elements uses when each counter feeds `per_counter` of them.
PhiloxState reserve_counters(Generator* gen, int64_t n, int64_t per_counter) {
  Generator& g = gen ? *gen : default_generator();
  const auto counters = static_cast<uint64_t>((n + per_counter - 1) / per_counter);
  return PhiloxState{g.seed(), g.reserve(counters)};
}

// float64 draws 64 bits per value, the other floating dtypes 32.
int64_t values_per_counter(DType dtype) { return dtype == kFloat64 ? 2 : 4; }

Tensor empty_random(const char* op, const Shape& sizes, DType dtype, Device device) {
  for (int64_t s : sizes) {
    TS_CHECK_SHAPE(s >= 0, "[", op, "] negative dimension ", s, " in shape ", sizes,
                   "; sizes must be >= 0");
  }
  return Tensor::make_empty(sizes, dtype, device);
}

void check_floating(const char* op, DType dtype) {
  TS_CHECK_DTYPE(is_floating_point(dtype), "[", op, "] expects a floating dtype (float16, ",
                 "bfloat16, float32 or float64), got ", dtype);
}

// The closed range of integers that `dtype` holds exactly: floating types hold every integer up
// to 2^digits, as PyTorch's random_ checks.
std::pair<double, double> exact_integer_range(DType dtype) {
  switch (dtype) {
    case kBool:
      return {0, 1};
    case kUInt8:
      return {0, 255};
    case kInt32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case kInt64:
      return {-0x1p63, 0x1p63};
    case kFloat16:
      return {-0x1p11, 0x1p11};
    case kBFloat16:
      return {-0x1p8, 0x1p8};
    case kFloat32:
      return {-0x1p24, 0x1p24};
    case kFloat64:
      return {-0x1p53, 0x1p53};
  }
  return {0, 0};
}

void check_dropout_input(const Tensor& a) {
  TS_CHECK_DTYPE(is_floating_point(a.dtype()), "[dropout] expects a floating input, got ",
                 a.dtype());
}

// Masks are 32-bit draws for every dtype; p == 1 keeps nothing and draws nothing.
PhiloxState dropout_counters(const Tensor& a, double p, Generator* gen) {
  return p < 1.0 ? reserve_counters(gen, a.numel(), 4) : PhiloxState{};
}

}  // namespace

Tensor rand(const Shape& sizes, TensorOptions options, Generator* gen) {
  check_floating("rand", options.dtype_);
  Tensor out = empty_random("rand", sizes, options.dtype_, options.device_);
  const PhiloxState st = reserve_counters(gen, out.numel(), values_per_counter(out.dtype()));
  kernels_for(out, "rand").uniform(out, st, 0.0, 1.0);
  out.requires_grad_(options.requires_grad_);
  return out;
}

Tensor randn(const Shape& sizes, TensorOptions options, Generator* gen) {
  check_floating("randn", options.dtype_);
  Tensor out = empty_random("randn", sizes, options.dtype_, options.device_);
  const PhiloxState st = reserve_counters(gen, out.numel(), values_per_counter(out.dtype()));
  kernels_for(out, "randn").normal(out, st, 0.0, 1.0);
  out.requires_grad_(options.requires_grad_);
  return out;
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options,
               Generator* gen) {
  TS_CHECK(low < high, "[randint] expects low < high, got low=", low, " and high=", high);
  const auto [min, max] = exact_integer_range(options.dtype_);
  // For int64, high - 1 may round up to 2^63 in double: the range's bound is 2^63 for that reason.
  TS_CHECK_DTYPE(static_cast<double>(low) >= min && static_cast<double>(high - 1) <= max,
                 "[randint] values in [", low, ", ", high, ") do not all fit dtype ",
                 options.dtype_, ", which holds the integers of [", fmt::format("{}", min), ", ",
                 fmt::format("{}", max), "]");
  TS_CHECK_DTYPE(!options.requires_grad_ || is_floating_point(options.dtype_),
                 "[randint] only tensors of floating point dtype can require gradients, got ",
                 options.dtype_);
  Tensor out = empty_random("randint", sizes, options.dtype_, options.device_);
  const PhiloxState st = reserve_counters(gen, out.numel(), 2);
  kernels_for(out, "randint").randint(out, st, low, high);
  out.requires_grad_(options.requires_grad_);
  return out;
}

Tensor dropout(const Tensor& a, double p, bool train, Generator* gen) {
  TS_CHECK(p >= 0.0 && p <= 1.0, "[dropout] probability has to be between 0 and 1, but got ", p);
  // The identity returns the input itself, as PyTorch: nothing to record.
  if (!train || p == 0.0) return a;
  if (any_distributed(a)) {
    return distributed_op("dropout", {a}, {.reals = {p}}, [p, gen](const LocalCall& c) {
      return std::vector{dropout(c.in[0], p, true, gen)};
    });
  }
  if (any_requires_grad(a)) return grad_hooks<NnGradHooks>().dropout(a, p, train, gen);
  check_dropout_input(a);
  Tensor out = Tensor::make_empty(a.sizes(), a.dtype(), a.device());
  kernels_for(a, "dropout").dropout(out, a, dropout_counters(a, p, gen), p);
  return out;
}

std::pair<Tensor, Tensor> detail::dropout_with_mask(const Tensor& a, double p, Generator* gen) {
  check_dropout_input(a);
  const KernelTable& k = kernels_for(a, "dropout");
  const PhiloxState st = dropout_counters(a, p, gen);
  Tensor out = Tensor::make_empty(a.sizes(), a.dtype(), a.device());
  k.dropout(out, a, st, p);
  // The mask is dropout of ones from the same counters: the same elements kept, each scaled.
  Tensor mask = Tensor::make_empty(a.sizes(), a.dtype(), a.device());
  const Tensor one = full({}, 1.0, TensorOptions(a.dtype()).device(a.device()));
  k.dropout(mask, one.expand(a.sizes()), st, p);
  return {out, mask};
}

}  // namespace tessera
