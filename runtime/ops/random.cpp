// Random factories (rand, randn, randint, rand_like, randn_like) and dropout: validate, reserve
// Philox counters from the generator, and fill through the device's kernels. See Note [Philox
// counter layout] in kernels/cpu/random.cpp for which counter feeds which element. The factories
// honour options.requires_grad (a leaf; floating dtypes only); dropout of an input that requires
// grad records through runtime/ops/nn_grad.h.
//
// Note [Random ops on distributed tensors]
// A random op on a DTensor gives, for any placements, the values the single-device op gives the
// global tensor, bitwise, and advances the generator as that op does (PyTorch's offset-based
// tracker does not: its values depend on the placements and the world size). Element i of a
// fill takes counter offset + i / per_counter, so a rank draws only the counters of the elements
// it holds: for each run of consecutive global indices in its block (LocalLayout::output_runs),
// it fills from the run's first counter, starting up to per_counter - 1 elements early when the
// run begins inside a counter (Box-Muller pairs and 64-bit words stay whole) and dropping those.
// The work is the local block's, not the global tensor's. Every rank then moves the generator
// past the global tensor's counters. dropout draws its keep-mask so (in the dtype its kernel
// computes in) and multiplies: the single-device kernel's x * (keep ? scale : 0) exactly.

#include <cmath>
#include <limits>
#include <utility>

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_grad.h"
#include "tessera/runtime/ops/nn_internal.h"
#include "tessera/runtime/ops/random_runs.h"

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

namespace {

Tensor random_like(const char* op, const Tensor& t, detail::RandomFill kind, Generator* gen) {
  check_floating(op, t.dtype());
  if (any_distributed(t)) {
    return distributed_op(op, {t}, {}, [kind, gen](const LocalCall& c) {
      c.layout.agree_generator(gen != nullptr ? *gen : default_generator());
      Tensor out = Tensor::make_empty(c.out_shapes[0], c.in[0].dtype(), c.in[0].device());
      detail::fill_random_runs(out, kind, c.layout.output_runs(0), c.layout.output_shape(0).numel(),
                               gen);
      return std::vector{out};
    });
  }
  return kind == detail::RandomFill::kUniform ? rand(t.sizes(), t.options(), gen)
                                              : randn(t.sizes(), t.options(), gen);
}

}  // namespace

Tensor rand_like(const Tensor& t, Generator* gen) {
  return random_like("rand_like", t, detail::RandomFill::kUniform, gen);
}

Tensor randn_like(const Tensor& t, Generator* gen) {
  return random_like("randn_like", t, detail::RandomFill::kNormal, gen);
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
    check_dropout_input(a);
    return distributed_op("dropout", {a}, {.reals = {p}}, [p, gen](const LocalCall& c) {
      c.layout.agree_generator(gen != nullptr ? *gen : default_generator());
      return std::vector{detail::dropout_runs(c.in[0], p, c.layout.output_runs(0),
                                              c.layout.output_shape(0).numel(), gen)};
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

namespace detail {

namespace {

// Calls fill(block, state) for each run: `block` is the run's part of the contiguous `out`, or a
// scratch tensor that starts up to per_counter - 1 elements earlier (at the run's first counter),
// whose tail is then copied in. Moves the generator past the global tensor's counters.
template <typename Fill>
void for_each_run_block(const Tensor& out, const std::vector<GlobalRun>& runs, int64_t global_numel,
                        int64_t per_counter, Generator* gen, const Fill& fill) {
  Generator& g = gen != nullptr ? *gen : default_generator();
  const uint64_t base = g.offset();
  const Tensor flat = out.view({out.numel()});
  Tensor scratch;
  int64_t at = 0;
  for (const GlobalRun& r : runs) {
    const int64_t skip = r.start % per_counter;
    const PhiloxState st{g.seed(), base + static_cast<uint64_t>(r.start / per_counter)};
    Tensor dst = flat.narrow(0, at, r.length);
    if (skip == 0) {
      fill(dst, st);
    } else {
      if (!scratch.defined() || scratch.numel() < skip + r.length) {
        scratch = Tensor::make_empty({skip + r.length}, out.dtype(), out.device());
      }
      const Tensor block = scratch.narrow(0, 0, skip + r.length);
      fill(block, st);
      dst.copy_(block.narrow(0, skip, r.length));
    }
    at += r.length;
  }
  TS_INTERNAL_ASSERT(at == out.numel(), "random runs cover ", at, " elements of a block of ",
                     out.numel());
  g.set_offset(base + static_cast<uint64_t>((global_numel + per_counter - 1) / per_counter));
}

}  // namespace

void fill_random_runs(const Tensor& out, RandomFill kind, const std::vector<GlobalRun>& runs,
                      int64_t global_numel, Generator* gen) {
  TS_INTERNAL_ASSERT(out.is_contiguous(), "fill_random_runs needs a contiguous block");
  const KernelTable& k = kernels_for(out, kind == RandomFill::kUniform ? "rand" : "randn");
  for_each_run_block(out, runs, global_numel, values_per_counter(out.dtype()), gen,
                     [&](const Tensor& block, PhiloxState st) {
                       if (kind == RandomFill::kUniform) {
                         k.uniform(block, st, 0.0, 1.0);
                       } else {
                         k.normal(block, st, 0.0, 1.0);
                       }
                     });
}

Tensor dropout_runs(const Tensor& local, double p, const std::vector<GlobalRun>& runs,
                    int64_t global_numel, Generator* gen) {
  check_dropout_input(local);
  // The dtype the dropout kernel computes in: the mask holds exactly its 0 and 1 / (1 - p).
  const DType compute = local.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor mask = Tensor::make_empty(local.sizes(), compute, local.device());
  if (p >= 1.0) {
    mask.zero_();  // nothing kept and nothing drawn, as the single-device op
  } else {
    const KernelTable& k = kernels_for(mask, "dropout");
    const Tensor one = full({}, 1.0, TensorOptions(compute).device(local.device()));
    for_each_run_block(mask, runs, global_numel, 4, gen, [&](const Tensor& block, PhiloxState st) {
      k.dropout(block, one.expand(block.sizes()), st, p);
    });
  }
  Tensor out = mul(local, mask);
  return out.dtype() == local.dtype() ? out : out.to(local.dtype());
}

}  // namespace detail

}  // namespace tessera
