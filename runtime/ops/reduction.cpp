// Reductions (runtime/ops.h): dims, result dtypes and shapes, and PyTorch's error cases. The
// work happens in KernelTable::reduce, which writes a contiguous keepdim-shaped result.

#include <algorithm>
#include <cmath>

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/reduction_grad.h"

namespace tessera {

namespace {

// Wraps and sorts `dims` (empty: all dims of `a`); a repeated dim is an error, as in PyTorch.
std::vector<int64_t> reduction_dims(const char* op, const Tensor& a,
                                    const std::vector<int64_t>& dims) {
  const int64_t nd = a.dim();
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, op);
    TS_CHECK_INDEX(std::find(out.begin(), out.end(), w) == out.end(), "[", op, "] dim ", w,
                   " appears multiple times in the list of dims ", Shape(dims));
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  if (nd == 0) out.clear();  // dim 0 / -1 of a 0-dim tensor names the tensor itself
  return out;
}

// amax/amin/max/argmax have no identity: every reduced dim must be non-empty.
void check_nonempty(const char* op, const Tensor& a, const std::vector<int64_t>& dims,
                    bool dims_given) {
  if (a.numel() != 0) return;
  TS_CHECK_INDEX(dims_given, "[", op,
                 "] expected reduction dim to be specified for input.numel() == 0 (input of shape ",
                 a.sizes(), "); specify the reduction dim with the dim argument");
  for (int64_t d : dims) {
    TS_CHECK_INDEX(a.size(d) != 0, "[", op, "] expected reduction dim ", d,
                   " to have non-zero size, got input of shape ", a.sizes());
  }
}

void check_floating(const char* op, const Tensor& a) {
  TS_CHECK_DTYPE(is_floating_point(a.dtype()), "[", op,
                 "] could not infer output dtype. Input dtype must be either a floating point or "
                 "complex dtype. Got: ",
                 a.dtype());
}

// Runs the kernel into a keepdim-shaped result, then drops the reduced dims unless keepdim.
// `dims` comes from reduction_dims (empty only for a 0-dim input).
Tensor reduce(ReductionOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
              DType out_dtype, double param = 0) {
  Shape kept = a.sizes();
  for (int64_t d : dims) kept[static_cast<size_t>(d)] = 1;
  Tensor out = Tensor::make_empty(kept, out_dtype, a.device());
  const KernelTable& k = kernels_for(a, op_name(op));
  if (a.dim() == 0) {
    k.reduce(op, out.view({1}), a.view({1}), {0}, param);
  } else {
    k.reduce(op, out, a, dims, param);
  }
  if (keepdim) return out;
  Shape squeezed;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (!std::binary_search(dims.begin(), dims.end(), d)) squeezed.push_back(a.size(d));
  }
  return out.view(squeezed);
}

// sum and prod: integral and bool inputs accumulate in int64 (the kernel's integral result);
// a requested dtype is computed in (floating) or cast to at the end (integral), as PyTorch.
Tensor sum_or_prod(ReductionOp op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
                   std::optional<DType> dtype) {
  const std::vector<int64_t> d = reduction_dims(op_name(op), a, dims);
  const DType natural = is_floating_point(a.dtype()) ? a.dtype() : kInt64;
  const DType target = dtype.value_or(natural);
  Tensor src = a;
  if (is_floating_point(target) != is_floating_point(a.dtype()) ||
      (is_floating_point(target) && target != a.dtype())) {
    src = a.to(target);
  }
  Tensor r = reduce(op, src, d, keepdim, is_floating_point(src.dtype()) ? src.dtype() : kInt64);
  return r.dtype() == target ? r : r.to(target);
}

// Index of the first maximum (minimum) of the flattened tensor, or along `dim`.
Tensor arg_reduce(ReductionOp op, const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  const char* name = op_name(op);
  TS_CHECK_DTYPE(a.dtype() != kBool, "[", name,
                 "] is not supported for bool inputs (as in PyTorch); convert with to()");
  if (dim) {
    const std::vector<int64_t> d = reduction_dims(name, a, {*dim});
    check_nonempty(name, a, d, true);
    return reduce(op, a, d, keepdim, kInt64);
  }
  check_nonempty(name, a, {}, false);
  Tensor r = reduce(op, a.reshape({a.numel()}), {0}, false, kInt64);
  return keepdim ? r.view(Shape(static_cast<size_t>(a.dim()), 1)) : r;
}

Tensor extreme_all(const char* name, ReductionOp op, const Tensor& a) {
  check_nonempty(name, a, {}, false);
  return reduce(op, a, reduction_dims(name, a, {}), false, a.dtype());
}

std::pair<Tensor, Tensor> extreme_dim(const char* name, ReductionOp values, ReductionOp indices,
                                      const Tensor& a, int64_t dim, bool keepdim) {
  const std::vector<int64_t> d = reduction_dims(name, a, {dim});
  check_nonempty(name, a, d, true);
  return {reduce(values, a, d, keepdim, a.dtype()), reduce(indices, a, d, keepdim, kInt64)};
}

// A reduction of a DTensor: the rule reads the wrapped, sorted dims and keepdim (Note
// [Distributed dispatch]); `local` runs the same reduction on the local shard.
Tensor distributed_reduction(const char* op, const Tensor& a, const std::vector<int64_t>& dims,
                             bool keepdim, std::function<Tensor(const Tensor&)> local) {
  return distributed_op(
      op, {a}, {.ints = reduction_dims(op, a, dims), .flag = keepdim},
      [local = std::move(local)](const LocalCall& c) { return std::vector{local(c.in[0])}; });
}

// max(a, dim) / min(a, dim) of a DTensor: values and indices, the reduced dim replicated.
std::pair<Tensor, Tensor> distributed_extreme_dim(const char* op, const Tensor& a, int64_t dim,
                                                  bool keepdim) {
  const bool is_max = op[1] == 'a';
  std::vector<Tensor> out = distributed_op_multi(
      is_max ? "max.dim" : "min.dim", {a}, {.ints = reduction_dims(op, a, {dim}), .flag = keepdim},
      [=](const LocalCall& c) {
        auto [values, indices] = is_max ? max(c.in[0], dim, keepdim) : min(c.in[0], dim, keepdim);
        return std::vector{values, indices};
      });
  return {out[0], out[1]};
}

// argmax / argmin of a DTensor; without a dim the index is into the flattened global tensor.
Tensor distributed_arg_reduce(const char* op, const Tensor& a, std::optional<int64_t> dim,
                              bool keepdim) {
  const bool is_max = op[4] == 'a';
  const std::string name = std::string(op) + (dim ? ".dim" : ".flat");
  const OpAttrs attrs{.ints = dim ? reduction_dims(op, a, {*dim}) : std::vector<int64_t>{},
                      .flag = keepdim};
  return distributed_op(name.c_str(), {a}, attrs, [=](const LocalCall& c) {
    return std::vector{is_max ? argmax(c.in[0], dim, keepdim) : argmin(c.in[0], dim, keepdim)};
  });
}

}  // namespace

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
           std::optional<DType> dtype) {
  if (any_distributed(a)) {
    return distributed_reduction("sum", a, dims, keepdim,
                                 [=](const Tensor& l) { return sum(l, dims, keepdim, dtype); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().sum(a, dims, keepdim, dtype);
  return sum_or_prod(ReductionOp::kSum, a, dims, keepdim, dtype);
}

Tensor prod(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (any_distributed(a)) {
    return distributed_reduction("prod", a, dims, keepdim,
                                 [=](const Tensor& l) { return prod(l, dims, keepdim); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().prod(a, dims, keepdim);
  return sum_or_prod(ReductionOp::kProd, a, dims, keepdim, std::nullopt);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (any_distributed(a)) {
    // The sum over the count: a sharded reduced dim gives Partial(sum), exact and differentiable
    // (Partial(avg) would need equal shards, and its gradient is not the local tape's).
    const std::vector<int64_t> d = reduction_dims("mean", a, dims);
    check_floating("mean", a);
    int64_t count = 1;
    for (int64_t dim : d) count *= a.size(dim);
    return sum(a, d, keepdim) / static_cast<double>(count);
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().mean(a, dims, keepdim);
  const std::vector<int64_t> d = reduction_dims("mean", a, dims);
  check_floating("mean", a);
  return reduce(ReductionOp::kMean, a, d, keepdim, a.dtype());
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (any_distributed(a)) {
    return distributed_reduction("amax", a, dims, keepdim,
                                 [=](const Tensor& l) { return amax(l, dims, keepdim); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().amax(a, dims, keepdim);
  const std::vector<int64_t> d = reduction_dims("amax", a, dims);
  check_nonempty("amax", a, d, !dims.empty());
  return reduce(ReductionOp::kAmax, a, d, keepdim, a.dtype());
}

Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (any_distributed(a)) {
    return distributed_reduction("amin", a, dims, keepdim,
                                 [=](const Tensor& l) { return amin(l, dims, keepdim); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().amin(a, dims, keepdim);
  const std::vector<int64_t> d = reduction_dims("amin", a, dims);
  check_nonempty("amin", a, d, !dims.empty());
  return reduce(ReductionOp::kAmin, a, d, keepdim, a.dtype());
}

Tensor max(const Tensor& a) {
  if (any_distributed(a)) {
    return distributed_reduction("amax", a, {}, false, [](const Tensor& l) { return max(l); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().max_all(a);
  return extreme_all("max", ReductionOp::kAmax, a);
}

Tensor min(const Tensor& a) {
  if (any_distributed(a)) {
    return distributed_reduction("amin", a, {}, false, [](const Tensor& l) { return min(l); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().min_all(a);
  return extreme_all("min", ReductionOp::kAmin, a);
}

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  if (any_distributed(a)) return distributed_extreme_dim("max", a, dim, keepdim);
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().max_dim(a, dim, keepdim);
  return extreme_dim("max", ReductionOp::kAmax, ReductionOp::kArgmax, a, dim, keepdim);
}

std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  if (any_distributed(a)) return distributed_extreme_dim("min", a, dim, keepdim);
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().min_dim(a, dim, keepdim);
  return extreme_dim("min", ReductionOp::kAmin, ReductionOp::kArgmin, a, dim, keepdim);
}

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (any_distributed(a)) return distributed_arg_reduce("argmax", a, dim, keepdim);
  return arg_reduce(ReductionOp::kArgmax, a, dim, keepdim);
}

Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (any_distributed(a)) return distributed_arg_reduce("argmin", a, dim, keepdim);
  return arg_reduce(ReductionOp::kArgmin, a, dim, keepdim);
}

Tensor var(const Tensor& a, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  if (any_distributed(a)) {
    return distributed_reduction("var", a, dims, keepdim, [=](const Tensor& l) {
      return var(l, dims, correction, keepdim);
    });
  }
  if (any_requires_grad(a)) {
    return grad_hooks<ReductionGradHooks>().var(a, dims, correction, keepdim);
  }
  const std::vector<int64_t> d = reduction_dims("var", a, dims);
  check_floating("var", a);
  return reduce(ReductionOp::kVar, a, d, keepdim, a.dtype(), correction);
}

Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  if (any_distributed(a)) {
    return distributed_reduction("norm", a, dims, keepdim,
                                 [=](const Tensor& l) { return norm(l, p, dims, keepdim); });
  }
  if (any_requires_grad(a)) return grad_hooks<ReductionGradHooks>().norm(a, p, dims, keepdim);
  const std::vector<int64_t> d = reduction_dims("norm", a, dims);
  check_floating("norm", a);
  if (a.numel() == 0) {
    TS_CHECK(p >= 0, "[norm] the norm of negative order p = ", p,
             " cannot be computed on an empty tensor (shape ", a.sizes(), ")");
    if (std::isinf(p)) {
      for (int64_t dim : d) {
        TS_CHECK(a.size(dim) != 0, "[norm] cannot compute the inf norm over dim ", dim,
                 " of size 0 (input of shape ", a.sizes(),
                 ") because the operation does not have an identity");
      }
    }
  }
  return reduce(ReductionOp::kNorm, a, d, keepdim, a.dtype(), p);
}

}  // namespace tessera
