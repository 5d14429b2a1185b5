// matmul, mm, bmm, linear: argument checks, torch.matmul's shape rules, type promotion; the
// products themselves are the device's KernelTable::matmul.

#include <algorithm>

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/linalg_grad.h"

namespace tessera {

namespace {

void check_defined(const char* op, const Tensor& a, const Tensor& b) {
  TS_CHECK(a.defined() && b.defined(), "[", op, "] called with an undefined tensor");
  TS_CHECK_T(DeviceError, a.device() == b.device(), "[", op,
             "] expected both tensors on the same device, got ", a.device(), " and ", b.device());
}

// The dtype both operands are converted to; bool has no product here.
DType product_dtype(const char* op, DType a, DType b) {
  TS_CHECK_DTYPE(a != kBool && b != kBool, "[", op, "] bool tensors are not supported, got ", a,
                 " and ", b, "; convert to an integral or floating dtype first");
  return promote_types(a, b);
}

void check_inner(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  TS_CHECK_SHAPE(ka == kb, "[", op, "] shapes ", a.sizes(), " and ", b.sizes(),
                 " cannot be multiplied (", ka, " != ", kb, ")");
}

// a [batch..., M, K] @ b [batch..., K, N] (+ bias [N] on every row, when defined) of one dtype
// with equal batch dims, as a new contiguous tensor.
Tensor run_kernel(const char* op, const Tensor& a, const Tensor& b, const Tensor& bias) {
  Shape sizes = a.sizes();
  sizes.back() = b.sizes().back();
  Tensor out = Tensor::make_empty(sizes, a.dtype(), a.device());
  const KernelTable& kernels = kernels_for(out, op);
  if (bias.defined() && kernels.matmul_bias != nullptr && kernels.matmul_bias(out, a, b, bias)) {
    return out;
  }
  kernels.matmul(out, a, b);
  if (bias.defined()) out += bias;  // in place into the fresh product: no second output buffer
  return out;
}

// t [d0, ..., dn-2, K] viewed as [d0 * ... * dn-2, K] when its leading dims are contiguous among
// themselves; an undefined tensor otherwise.
Tensor fold_leading_dims(const Tensor& t) {
  const int64_t nd = t.dim();
  int64_t rows = 1;
  int64_t row_stride = t.stride(nd - 2);
  int64_t expected = -1;  // stride the next outer dim must have; -1 until a dim of size > 1
  for (int64_t d = nd - 2; d >= 0; --d) {
    const int64_t size = t.size(d);
    rows *= size;
    if (size == 1) continue;
    if (expected == -1) {
      row_stride = t.stride(d);
    } else if (t.stride(d) != expected) {
      return {};
    }
    expected = t.stride(d) * size;
  }
  return Tensor::make_view(t.storage(), {rows, t.size(nd - 1)}, {row_stride, t.stride(nd - 1)},
                           t.storage_offset(), t.dtype());
}

// Broadcast of the batch dims (all but the last two) of a and b, named after the full shapes.
Shape broadcast_batch(const char* op, const Tensor& a, const Tensor& b) {
  const int64_t na = a.dim() - 2, nb = b.dim() - 2;
  const int64_t n = std::max(na, nb);
  Shape batch(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - na ? 1 : a.size(i - (n - na));
    const int64_t sb = i < n - nb ? 1 : b.size(i - (n - nb));
    TS_CHECK_SHAPE(sa == sb || sa == 1 || sb == 1, "[", op, "] batch dimensions of shapes ",
                   a.sizes(), " and ", b.sizes(), " cannot be broadcast: size ", sa, " vs ", sb,
                   " (sizes must match or one of them must be 1)");
    batch[static_cast<size_t>(i)] = sa == 1 ? sb : sa;
  }
  return batch;
}

// torch.matmul: a, b of at least 1 dim; `dtype` the promoted dtype. A defined `bias` ([N],
// contiguous, of `dtype`; b 2-D) is added to every row of the product.
Tensor matmul_impl(const char* op, const Tensor& a, const Tensor& b, DType dtype,
                   const Tensor& bias = Tensor()) {
  const int64_t da = a.dim(), db = b.dim();
  TS_CHECK_SHAPE(da >= 1 && db >= 1, "[", op,
                 "] both arguments need at least 1 dimension, got shapes ", a.sizes(), " and ",
                 b.sizes());
  check_inner(op, a, b, a.size(-1), db == 1 ? b.size(0) : b.size(-2));
  // Converted before any expand, so that broadcast dims are not replicated. A 1-D a is a row
  // [1, K] and a 1-D b a column [K, 1]; the added dim is removed at the end.
  const Tensor a2 = da == 1 ? a.to(dtype).unsqueeze(0) : a.to(dtype);
  const Tensor b2 = db == 1 ? b.to(dtype).unsqueeze(1) : b.to(dtype);
  const int64_t m = a2.size(-2), n = b2.size(-1);

  // A batched a times a matrix b: one large product instead of a batch of products sharing b.
  const Tensor folded = da >= 3 && db <= 2 ? fold_leading_dims(a2) : Tensor();
  Shape batch;
  Tensor out;
  if (da <= 2 && db <= 2) {
    out = run_kernel(op, a2, b2, bias);
  } else if (folded.defined()) {
    batch.assign(a2.sizes().begin(), a2.sizes().end() - 2);
    out = run_kernel(op, folded, b2, bias);
  } else {
    batch = broadcast_batch(op, a2, b2);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), {m, a2.size(-1)});
    sb.insert(sb.end(), {b2.size(-2), n});
    out = run_kernel(op, a2.expand(sa), b2.expand(sb), bias);
  }
  Shape result = batch;
  if (da > 1) result.push_back(m);
  if (db > 1) result.push_back(n);
  return out.view(result);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (any_distributed(a, b)) {
    return distributed_op("matmul", {a, b}, {},
                          [](const LocalCall& c) { return std::vector{matmul(c.in[0], c.in[1])}; });
  }
  if (any_requires_grad(a, b)) return grad_hooks<LinalgGradHooks>().matmul(a, b);
  check_defined("matmul", a, b);
  return matmul_impl("matmul", a, b, product_dtype("matmul", a.dtype(), b.dtype()));
}

Tensor mm(const Tensor& a, const Tensor& b) {
  if (any_distributed(a, b)) {
    return distributed_op("mm", {a, b}, {},
                          [](const LocalCall& c) { return std::vector{mm(c.in[0], c.in[1])}; });
  }
  if (any_requires_grad(a, b)) return grad_hooks<LinalgGradHooks>().mm(a, b);
  check_defined("mm", a, b);
  TS_CHECK_SHAPE(a.dim() == 2 && b.dim() == 2, "[mm] expects 2-D tensors, got shapes ", a.sizes(),
                 " (", a.dim(), "-D) and ", b.sizes(), " (", b.dim(), "-D)");
  return matmul_impl("mm", a, b, product_dtype("mm", a.dtype(), b.dtype()));
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (any_distributed(a, b)) {
    return distributed_op("bmm", {a, b}, {},
                          [](const LocalCall& c) { return std::vector{bmm(c.in[0], c.in[1])}; });
  }
  if (any_requires_grad(a, b)) return grad_hooks<LinalgGradHooks>().bmm(a, b);
  check_defined("bmm", a, b);
  TS_CHECK_SHAPE(a.dim() == 3 && b.dim() == 3, "[bmm] expects 3-D tensors, got shapes ", a.sizes(),
                 " (", a.dim(), "-D) and ", b.sizes(), " (", b.dim(), "-D)");
  TS_CHECK_SHAPE(a.size(0) == b.size(0), "[bmm] batch sizes must be equal, got shapes ", a.sizes(),
                 " and ", b.sizes(), " (", a.size(0), " != ", b.size(0), ")");
  return matmul_impl("bmm", a, b, product_dtype("bmm", a.dtype(), b.dtype()));
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_defined("linear", x, weight);
  TS_CHECK_SHAPE(x.dim() >= 1, "[linear] input must have at least 1 dimension, got shape ",
                 x.sizes());
  TS_CHECK_SHAPE(weight.dim() == 1 || weight.dim() == 2,
                 "[linear] weight must be 1-D [in_features] or 2-D [out_features, in_features], "
                 "got shape ",
                 weight.sizes());
  TS_CHECK_SHAPE(x.size(-1) == weight.size(-1), "[linear] input of shape ", x.sizes(),
                 " and weight of shape ", weight.sizes(), " are incompatible: input's last dim ",
                 x.size(-1), " != in_features ", weight.size(-1));
  DType dtype = product_dtype("linear", x.dtype(), weight.dtype());
  if (bias.defined()) {
    check_defined("linear", x, bias);
    dtype = product_dtype("linear", dtype, bias.dtype());
    Shape out_sizes(x.sizes().begin(), x.sizes().end() - 1);
    if (weight.dim() == 2) out_sizes.push_back(weight.size(0));
    bool broadcastable = bias.dim() <= static_cast<int64_t>(out_sizes.size());
    for (int64_t i = 1; broadcastable && i <= bias.dim(); ++i) {
      broadcastable = bias.size(-i) == 1 || bias.size(-i) == out_sizes[out_sizes.size() - i];
    }
    TS_CHECK_SHAPE(broadcastable, "[linear] bias of shape ", bias.sizes(),
                   " does not broadcast to the output shape ", out_sizes, " (input ", x.sizes(),
                   ", weight ", weight.sizes(), ")");
  }
  const bool distributed = any_distributed(x, weight, bias);
  // The usual layer (weight [N, K], bias [N], one dtype): product and bias in one pass and, under
  // autograd, one node (Note [Bias in the product] in kernels/cpu/linalg.cpp).
  const bool one_op = !distributed && bias.defined() && weight.dim() == 2 && bias.dim() == 1 &&
                      bias.size(0) == weight.size(0) && x.dtype() == dtype &&
                      weight.dtype() == dtype && bias.dtype() == dtype;
  if (one_op) {
    if (any_requires_grad(x, weight, bias)) {
      return grad_hooks<LinalgGradHooks>().linear(x, weight, bias);
    }
    return matmul_impl("linear", x, weight.t(), dtype, bias.contiguous());
  }
  // Otherwise, under autograd linear is its parts, which record (PyTorch's graph for it is the
  // same: a transposed weight, a product and an add); on DTensors too, each part with its
  // sharding rule.
  const bool recording = any_requires_grad(x, weight, bias) || distributed;
  Tensor out = recording ? matmul(x, weight.t()) : matmul_impl("linear", x, weight.t(), dtype);
  if (!bias.defined()) return out;
  if (recording) return add(out, bias);
  out += bias;  // in place into the fresh product: no second output buffer
  return out;
}

}  // namespace tessera
