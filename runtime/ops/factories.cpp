// Tensor factories: empty, zeros, ones, full, *_like, arange, linspace, logspace, eye,
// scalar_tensor. Those taking TensorOptions honour requires_grad: the result is a leaf that
// requires grad.

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"

namespace tessera {

namespace {

// Marks a fresh factory result as a leaf that requires grad when the options ask for it (only
// after it was filled: writing into such a leaf in grad mode is an error).
Tensor finish(const char* op, Tensor t, const TensorOptions& options) {
  if (!options.requires_grad_) return t;
  TS_CHECK_DTYPE(is_floating_point(t.dtype()), "[", op,
                 "] only tensors of floating point dtype can require gradients, got ", t.dtype());
  t.requires_grad_();
  return t;
}

Tensor filled(const char* op, const Shape& sizes, const Scalar& value, TensorOptions options) {
  // Before the allocation: full({2}, 300, kUInt8) fails without touching memory.
  check_fits(value, options.dtype_, op);
  Tensor t = Tensor::make_empty(sizes, options.dtype_, options.device_, op);
  t.fill_(value);
  return finish(op, std::move(t), options);
}

// Computes value(i) for i in [0, steps) on the host in the dtype's arithmetic (float for the
// reduced types), then moves the result to `device`. linspace and logspace are small setup
// tensors, so a host loop costs less than a kernel per device.
template <typename F>
Tensor host_sequence(const char* op, int64_t steps, TensorOptions options, const F& value) {
  TS_CHECK(steps >= 0, "[", op, "] number of steps must be non-negative, got ", steps);
  TS_CHECK_DTYPE(options.dtype_ != kBool, "[", op, "] is not supported for dtype bool");
  Tensor t = Tensor::make_empty({steps}, options.dtype_, Device::cpu(), op);
  visit_dtype(options.dtype_, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      T* p = t.data_ptr<T>();
      for (int64_t i = 0; i < steps; ++i) p[i] = value(T{}, i);
    }
  });
  return options.device_.is_cpu() ? t : t.to(options.device_);
}

// PyTorch's linspace arithmetic: integers step in double; floating types in their own type
// (float for float16/bfloat16). The second half counts back from `end`, so the last value is
// exactly `end` and the sequence is symmetric.
template <typename T>
using StepType = std::conditional_t<std::is_integral_v<T>, double,
                                    std::conditional_t<std::is_same_v<T, double>, double, float>>;

// Integers truncate through int64 (wrapping out-of-range values instead of undefined behavior);
// floating values round through the step type.
template <typename T>
T to_dtype(double v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(static_cast<StepType<T>>(v));
  }
}

template <typename T>
StepType<T> linspace_point(double start, double end, int64_t steps, int64_t i) {
  using S = StepType<T>;
  // As PyTorch, start and end are first converted to the output dtype.
  const S s = static_cast<S>(to_dtype<T>(start));
  const S e = static_cast<S>(to_dtype<T>(end));
  if (steps == 1) return s;
  const S step = (e - s) / static_cast<S>(steps - 1);
  if (i < steps / 2) return s + step * static_cast<S>(i);
  return e - step * static_cast<S>(steps - i - 1);
}

}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  return finish("empty", Tensor::make_empty(sizes, options.dtype_, options.device_, "empty"),
                options);
}

Tensor zeros(const Shape& sizes, TensorOptions options) {
  return filled("zeros", sizes, int64_t{0}, options);
}

Tensor ones(const Shape& sizes, TensorOptions options) {
  return filled("ones", sizes, int64_t{1}, options);
}

Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options) {
  return filled("full", sizes, value, options);
}

// The *_like factories return contiguous tensors of t's shape, dtype and device; of a DTensor,
// a DTensor of its layout (Partial replaced by Replicate).
Tensor empty_like(const Tensor& t) {
  if (any_distributed(t)) {
    return distributed_op("empty_like", {t}, {},
                          [](const LocalCall& c) { return std::vector{empty_like(c.in[0])}; });
  }
  return Tensor::make_empty(t.sizes(), t.dtype(), t.device());
}
Tensor zeros_like(const Tensor& t) {
  return any_distributed(t) ? full_like(t, 0) : zeros(t.sizes(), t.options());
}
Tensor ones_like(const Tensor& t) {
  return any_distributed(t) ? full_like(t, 1) : ones(t.sizes(), t.options());
}
Tensor full_like(const Tensor& t, const Scalar& value) {
  if (any_distributed(t)) {
    return distributed_op(
        "full_like", {t}, {.reals = {value.to_double()}},
        [value](const LocalCall& c) { return std::vector{full_like(c.in[0], value)}; });
  }
  return full(t.sizes(), value, t.options());
}

Tensor arange(const Scalar& end, TensorOptions options) {
  // TensorOptions cannot tell a default float32 from a requested one: an integral `end` with the
  // default dtype gives int64, as torch.arange(5); arange(end, DType) forces a dtype.
  const bool infer = options.dtype_ == default_float_dtype() && !end.is_floating_point();
  return finish(
      "arange",
      arange(int64_t{0}, end, int64_t{1}, infer ? kInt64 : options.dtype_, options.device_),
      options);
}

Tensor arange(const Scalar& end, DType dtype) {
  return arange(int64_t{0}, end, int64_t{1}, dtype, Device::cpu());
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              std::optional<DType> dtype, Device device) {
  const bool integral_args =
      !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  const DType dt = dtype.value_or(integral_args ? kInt64 : default_float_dtype());
  TS_CHECK_DTYPE(dt != kBool, "[arange] is not supported for dtype bool");
  TS_CHECK(std::isfinite(start.to_double()) && std::isfinite(end.to_double()),
           "[arange] unsupported range: ", start, " -> ", end);
  // PyTorch's arithmetic: integral dtypes work on the arguments truncated to int64, floating
  // ones in double.
  double xstart = start.to_double(), xend = end.to_double(), xstep = step.to_double();
  if (is_integral(dt)) {
    TS_CHECK(std::isfinite(xstep), "[arange] step must be finite for dtype ", dt, ", got ", step);
    xstart = static_cast<double>(start.to_int64());
    xend = static_cast<double>(end.to_int64());
    xstep = static_cast<double>(step.to_int64());
  }
  TS_CHECK(xstep != 0, "[arange] step must be nonzero (got step ", step, " for dtype ", dt, ")");
  TS_CHECK((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart),
           "[arange] upper bound and lower bound inconsistent with step sign: start ", start,
           ", end ", end, ", step ", step);
  double size_d;
  if (dt == kInt64) {
    const int64_t s = start.to_int64(), e = end.to_int64(), st = step.to_int64();
    const int64_t sign = st > 0 ? 1 : -1;
    size_d = static_cast<double>((e - s + st - sign) / st);
  } else {
    size_d = std::ceil((end.to_double() - start.to_double()) / step.to_double());
  }
  TS_CHECK(size_d >= 0 && size_d <= 0x1p62, "[arange] invalid size ", size_d, " for start ", start,
           ", end ", end, ", step ", step, "; possible overflow?");
  Tensor out = Tensor::make_empty({static_cast<int64_t>(size_d)}, dt, device);
  if (out.numel() > 0) kernels_for(out, "arange").arange(out, xstart, xstep);
  return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  Tensor t = host_sequence("linspace", steps, options, [&](auto tag, int64_t i) {
    using T = decltype(tag);
    return to_dtype<T>(static_cast<double>(linspace_point<T>(start, end, steps, i)));
  });
  return finish("linspace", std::move(t), options);
}

Tensor logspace(double start, double end, int64_t steps, double base, TensorOptions options) {
  Tensor t = host_sequence("logspace", steps, options, [&](auto tag, int64_t i) {
    using T = decltype(tag);
    using S = StepType<T>;
    const S exponent = linspace_point<T>(start, end, steps, i);
    return to_dtype<T>(static_cast<double>(std::pow(static_cast<S>(base), exponent)));
  });
  return finish("logspace", std::move(t), options);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions options) {
  const int64_t cols = m.value_or(n);
  TS_CHECK(n >= 0, "[eye] n must be greater or equal to 0, got ", n);
  TS_CHECK(cols >= 0, "[eye] m must be greater or equal to 0, got ", cols);
  Tensor out = zeros({n, cols}, options.requires_grad(false));
  const int64_t diag = std::min(n, cols);
  if (diag > 0) {
    Tensor::make_view(out.storage(), {diag}, {cols + 1}, 0, out.dtype()).fill_(int64_t{1});
  }
  return finish("eye", std::move(out), options);
}

Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype) {
  return full({}, value, dtype.value_or(value.natural_dtype()));
}

}  // namespace tessera
