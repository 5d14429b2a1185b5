// nn functions (runtime/ops.h): softmax, log_softmax, layer_norm, rms_norm, embedding,
// cross_entropy, scaled_dot_product_attention. Entry points validate, allocate contiguous outputs
// and call the nn kernels, which read strided inputs directly. The only copies made here are of
// integer indices / targets (read on the host for range checks) and of [N, C, d...] logits, whose
// class dim cross_entropy moves last. Inputs that require grad go to the autograd slots
// (runtime/ops/nn_grad.h); the internal entry points of runtime/ops/nn_internal.h serve them.

#include <cmath>
#include <limits>

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_grad.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera {

namespace {

void check_floating(const Tensor& t, const char* op, const char* what) {
  TS_CHECK_DTYPE(is_floating_point(t.dtype()), "[", op, "] expected a floating point ", what,
                 ", got ", t.dtype());
}

void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* what) {
  TS_CHECK_T(DeviceError, t.device() == ref.device(), "[", op, "] expected ", what, " on ",
             ref.device(), " like the input, got ", t.device());
}

Tensor softmax_impl(const Tensor& a, int64_t dim, bool log, const char* op) {
  check_floating(a, op, "input");
  if (a.dim() == 0) {  // a scalar is a row of one, as in PyTorch
    wrap_dim(dim, 0, op);
    return softmax_impl(a.reshape({1}), 0, log, op).reshape({});
  }
  const int64_t d = wrap_dim(dim, a.dim(), op);
  Tensor out = Tensor::make_empty(a.sizes(), a.dtype(), a.device());
  if (out.numel() > 0) kernels_for(a, op).softmax(out, a, d, log);
  return out;
}

// Shapes of x's leading dims (those not normalized); checks that x ends with normalized_shape.
Shape leading_shape(const Tensor& x, const Shape& normalized_shape, const char* op) {
  const int64_t k = normalized_shape.ndim();
  TS_CHECK_SHAPE(k >= 1, "[", op, "] normalized_shape must have at least one dim, got ",
                 normalized_shape);
  const int64_t lead = x.dim() - k;
  bool ok = lead >= 0;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.size(lead + i) == normalized_shape[i];
  TS_CHECK_SHAPE(ok, "[", op, "] input of shape ", x.sizes(),
                 " does not end with normalized_shape ", normalized_shape,
                 "; expected an input of shape [*, ",
                 fmt::format("{}", fmt::join(normalized_shape, ", ")), "]");
  return Shape(x.sizes().begin(), x.sizes().begin() + lead);
}

// weight / bias of a norm: normalized_shape, on x's device. layer_norm wants x's dtype (or
// float32 for a float16/bfloat16 x: PyTorch's mixed-precision CPU layer_norm); rms_norm, which
// PyTorch composes from pointwise ops, any floating dtype. The output keeps x's dtype.
void check_norm_param(const Tensor& p, const Tensor& x, const Shape& normalized_shape,
                      const char* op, const char* what, bool any_floating) {
  if (!p.defined()) return;
  TS_CHECK_SHAPE(p.sizes() == normalized_shape, "[", op, "] expected ", what, " of shape ",
                 normalized_shape, " (normalized_shape), got ", p.sizes());
  check_same_device(p, x, op, what);
  if (any_floating) {
    check_floating(p, op, what);
    return;
  }
  const bool mixed = is_reduced_float(x.dtype()) && p.dtype() == kFloat32;
  TS_CHECK_DTYPE(p.dtype() == x.dtype() || mixed, "[", op, "] expected ", what, " of dtype ",
                 x.dtype(), " like the input", is_reduced_float(x.dtype()) ? " (or float32)" : "",
                 ", got ", p.dtype());
}

// Whether `from` broadcasts to `to` without growing it.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.ndim() > to.ndim()) return false;
  const int64_t skip = to.ndim() - from.ndim();
  for (int64_t d = 0; d < from.ndim(); ++d) {
    if (from[d] != 1 && from[d] != to[skip + d]) return false;
  }
  return true;
}

// Statistics are kept in float32, or float64 for float64 inputs.
DType stat_dtype(DType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  if (any_distributed(a)) {
    return distributed_op("softmax", {a}, {.ints = {wrap_dim(dim, a.dim(), "softmax")}},
                          [dim](const LocalCall& c) { return std::vector{softmax(c.in[0], dim)}; });
  }
  if (any_requires_grad(a)) return grad_hooks<NnGradHooks>().softmax(a, dim);
  return softmax_impl(a, dim, false, "softmax");
}

Tensor log_softmax(const Tensor& a, int64_t dim) {
  if (any_distributed(a)) {
    return distributed_op(
        "log_softmax", {a}, {.ints = {wrap_dim(dim, a.dim(), "log_softmax")}},
        [dim](const LocalCall& c) { return std::vector{log_softmax(c.in[0], dim)}; });
  }
  if (any_requires_grad(a)) return grad_hooks<NnGradHooks>().log_softmax(a, dim);
  return softmax_impl(a, dim, true, "log_softmax");
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  if (any_distributed(x, weight, bias)) {
    return distributed_op(
        "layer_norm", {x, weight, bias}, {.ints = {normalized_shape.ndim()}},
        [normalized_shape, eps](const LocalCall& c) {
          return std::vector{layer_norm(c.in[0], normalized_shape, c.in[1], c.in[2], eps)};
        });
  }
  if (any_requires_grad(x, weight, bias)) {
    return grad_hooks<NnGradHooks>().layer_norm(x, normalized_shape, weight, bias, eps);
  }
  return detail::layer_norm_forward(x, normalized_shape, weight, bias, eps).out;
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  if (any_distributed(x, weight)) {
    return distributed_op("rms_norm", {x, weight}, {.ints = {normalized_shape.ndim()}},
                          [normalized_shape, eps](const LocalCall& c) {
                            return std::vector{rms_norm(c.in[0], normalized_shape, c.in[1], eps)};
                          });
  }
  if (any_requires_grad(x, weight)) {
    return grad_hooks<NnGradHooks>().rms_norm(x, normalized_shape, weight, eps);
  }
  return detail::rms_norm_forward(x, normalized_shape, weight, eps).out;
}

namespace detail {

namespace {

// Rows of zero elements (x is [4, 0, 9] normalized over [0, 9]) have no kernel work, but their
// statistics exist: NaN, as torch.mean and torch.var of nothing.
void fill_empty_row_statistics(const Tensor& mean, const Tensor& rstd) {
  for (Tensor t : {mean, rstd}) {  // handles: fill_ writes the shared storage
    if (t.defined() && t.numel() > 0) t.fill_(std::numeric_limits<double>::quiet_NaN());
  }
}

}  // namespace

NormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                               const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  check_floating(x, op, "input");
  const Shape lead = leading_shape(x, normalized_shape, op);
  check_norm_param(weight, x, normalized_shape, op, "weight", false);
  check_norm_param(bias, x, normalized_shape, op, "bias", false);
  Tensor out = Tensor::make_empty(x.sizes(), x.dtype(), x.device());
  Tensor mean = Tensor::make_empty(lead, stat_dtype(x.dtype()), x.device());
  Tensor rstd = Tensor::make_empty(lead, stat_dtype(x.dtype()), x.device());
  if (x.numel() > 0) {
    kernels_for(x, op).layer_norm(out, mean, rstd, x, weight, bias, normalized_shape.ndim(), eps);
  } else {
    fill_empty_row_statistics(mean, rstd);
  }
  return {out, mean, rstd};
}

double rms_norm_eps(DType dtype, std::optional<double> eps) {
  // PyTorch's default is the machine epsilon of the type it computes in (float32 for float16 and
  // bfloat16 inputs), not that of the input's dtype.
  return eps.value_or(dtype == kFloat64
                          ? std::numeric_limits<double>::epsilon()
                          : static_cast<double>(std::numeric_limits<float>::epsilon()));
}

NormForward rms_norm_forward(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                             std::optional<double> eps) {
  const char* op = "rms_norm";
  check_floating(x, op, "input");
  const Shape lead = leading_shape(x, normalized_shape, op);
  check_norm_param(weight, x, normalized_shape, op, "weight", true);
  const double e = rms_norm_eps(x.dtype(), eps);
  Tensor out = Tensor::make_empty(x.sizes(), x.dtype(), x.device());
  Tensor rstd = Tensor::make_empty(lead, stat_dtype(x.dtype()), x.device());
  if (x.numel() > 0) {
    kernels_for(x, op).rms_norm(out, rstd, x, weight, normalized_shape.ndim(), e);
  } else {
    fill_empty_row_statistics(Tensor(), rstd);
  }
  return {out, Tensor(), rstd};
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights) {
  if (any_requires_grad(grad)) {
    return grad_hooks<NnGradHooks>().embedding_backward(grad, indices, num_weights);
  }
  const int64_t d = grad.size(-1);
  const int64_t n = indices.numel();
  // Sums run in float32 (float64 for float64) so that repeated indices of float16 / bfloat16
  // gradients do not lose precision; the result takes grad's dtype.
  Tensor out =
      zeros({num_weights, d}, TensorOptions(stat_dtype(grad.dtype())).device(grad.device()));
  if (n > 0 && d > 0) {
    kernels_for(grad, "embedding_backward")
        .embedding_backward(out, grad.reshape({n, d}), indices.contiguous().reshape({n}));
  }
  return out.dtype() == grad.dtype() ? out : out.to(grad.dtype());
}

}  // namespace detail

namespace {

// The lookup of a rank holding rows [first, first + weight.size(0)) of a [num_rows, D] table
// (vocabulary-sharded): indices outside its rows give zero rows, so the ranks' results sum to
// the whole lookup exactly (a Partial(sum); PyTorch's _MaskPartial). Indices are checked against
// the whole table, as the single-device op does.
Tensor embedding_rows(const Tensor& weight, const Tensor& indices, int64_t first,
                      int64_t num_rows) {
  const char* op = "embedding";
  TS_CHECK_DTYPE(indices.dtype() == kInt32 || indices.dtype() == kInt64, "[", op,
                 "] expected indices of dtype int32 or int64, got ", indices.dtype());
  if (indices.numel() > 0) {
    const auto lo = amin(indices).to(kInt64).item<int64_t>();
    const auto hi = amax(indices).to(kInt64).item<int64_t>();
    TS_CHECK_INDEX(lo >= 0 && hi < num_rows, "[", op, "] index ", lo < 0 ? lo : hi,
                   " is out of range for a weight of ", num_rows, " rows");
  }
  const int64_t rows = weight.size(0);
  const Tensor mine = logical_and(indices >= first, indices < first + rows);
  if (rows == 0) {
    // No rows here: look up one appended zero row, which keeps this rank's autograd graph the
    // same as the others' (their backward collectives need every rank).
    const Tensor padded = cat({weight, zeros({1, weight.size(1)}, weight.options())});
    return embedding(padded, zeros_like(indices));
  }
  const Tensor local = where(mine, sub(indices, first), zeros_like(indices));
  const Tensor zero = zeros({}, weight.options());
  return where(mine.unsqueeze(-1), embedding(weight, local), zero);
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  TS_CHECK_SHAPE(weight.dim() == 2, "[embedding] expected a 2-D weight [num_embeddings, dim], got ",
                 "shape ", weight.sizes());
  if (any_distributed(weight, indices)) {
    return distributed_op("embedding", {weight, indices}, {}, [](const LocalCall& c) {
      const int64_t num_rows = c.layout.input_shape(0).at(0);
      if (c.in[0].size(0) == num_rows) return std::vector{embedding(c.in[0], c.in[1])};
      return std::vector{embedding_rows(c.in[0], c.in[1], c.layout.input_offset(0, 0), num_rows)};
    });
  }
  if (any_requires_grad(weight)) return grad_hooks<NnGradHooks>().embedding(weight, indices);
  const char* op = "embedding";
  TS_CHECK_DTYPE(indices.dtype() == kInt32 || indices.dtype() == kInt64, "[", op,
                 "] expected indices of dtype int32 or int64, got ", indices.dtype());
  check_same_device(indices, weight, op, "indices");
  const int64_t v = weight.size(0);
  const int64_t n = indices.numel();
  // Range check on the host: an out-of-range index is a caller mistake, never a wild read.
  const Tensor flat = indices.contiguous().reshape({n});
  const Tensor host = flat.cpu();
  auto check = [&](auto tag) {
    using I = decltype(tag);
    const I* p = host.data_ptr<I>();
    for (int64_t i = 0; i < n; ++i) {
      TS_CHECK_INDEX(p[i] >= 0 && p[i] < v, "[", op, "] index ", static_cast<int64_t>(p[i]),
                     " is out of range for a weight of ", v, " rows");
    }
  };
  if (indices.dtype() == kInt32) {
    check(int32_t{});
  } else {
    check(int64_t{});
  }
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = Tensor::make_empty({n, weight.size(1)}, weight.dtype(), weight.device());
  if (out.numel() > 0) kernels_for(weight, op).embedding(out, weight, flat);
  return out.view(out_shape);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions options) {
  if (any_distributed(logits, target)) {
    return distributed_op("cross_entropy", {logits, target},
                          {.ints = {options.ignore_index, static_cast<int64_t>(options.reduction)},
                           .reals = {options.label_smoothing}},
                          [options](const LocalCall& c) {
                            return std::vector{cross_entropy(c.in[0], c.in[1], options)};
                          });
  }
  if (any_requires_grad(logits)) {
    return grad_hooks<NnGradHooks>().cross_entropy(logits, target, options);
  }
  const char* op = "cross_entropy";
  check_floating(logits, op, "input (logits)");
  TS_CHECK_DTYPE(target.dtype() == kInt64, "[", op,
                 "] expected a target of class indices of dtype int64, got ", target.dtype());
  check_same_device(target, logits, op, "target");
  TS_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0, "[", op,
           "] label_smoothing must be in [0, 1], got ", options.label_smoothing);
  TS_CHECK_SHAPE(logits.dim() >= 1, "[", op, "] expected logits of shape [C], [N, C] or ",
                 "[N, C, d1, ...], got a 0-dim tensor");
  // Move the class dim last: [C] -> [1, C]; [N, C, d...] -> [N * prod(d), C].
  Shape sample_shape;  // target's expected shape
  Tensor rows;
  if (logits.dim() == 1) {
    rows = logits.unsqueeze(0);
  } else {
    sample_shape.push_back(logits.size(0));
    for (int64_t d = 2; d < logits.dim(); ++d) sample_shape.push_back(logits.size(d));
    rows = logits.dim() == 2 ? logits : logits.permute(detail::class_dim_last(logits.dim()));
    rows = rows.reshape({sample_shape.numel(), logits.size(1)});
  }
  TS_CHECK_SHAPE(target.sizes() == sample_shape, "[", op, "] expected a target of shape ",
                 sample_shape, " for logits of shape ", logits.sizes(), ", got ", target.sizes());
  const int64_t c = rows.size(1);
  const int64_t n = rows.size(0);
  const Tensor flat_target = target.contiguous().reshape({n});
  const Tensor host_target = flat_target.cpu();
  const int64_t* t = host_target.data_ptr<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == options.ignore_index) continue;
    TS_CHECK_INDEX(t[i] >= 0 && t[i] < c, "[", op, "] target ", t[i], " is out of range for ", c,
                   " classes (expected a class index in [0, ", c, ") or ignore_index ",
                   options.ignore_index, ")");
    ++counted;
  }
  const KernelTable& k = kernels_for(logits, op);
  Tensor logp = Tensor::make_empty(rows.sizes(), rows.dtype(), rows.device());
  if (logp.numel() > 0) k.softmax(logp, rows, 1, true);
  Tensor per_sample = Tensor::make_empty({n}, rows.dtype(), rows.device());
  if (n > 0) {
    k.nll_loss(per_sample, logp, flat_target, options.ignore_index, options.label_smoothing);
  }
  if (options.reduction == Reduction::None) return per_sample.view(sample_shape);
  // Sum in float64 on the host: n is the batch size, small next to the logits.
  const Tensor losses = per_sample.to(kFloat64).cpu();
  const double* l = losses.data_ptr<double>();
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += l[i];
  // As PyTorch, a mean over zero counted targets is 0 / 0 = nan.
  if (options.reduction == Reduction::Mean) total /= static_cast<double>(counted);
  Tensor result = Tensor::make_empty({}, logits.dtype(), Device::cpu());
  result.fill_(total);
  return logits.device().is_cpu() ? result : result.to(logits.device());
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  if (any_distributed(query, key, value, attn_mask)) {
    return distributed_op(
        "scaled_dot_product_attention", {query, key, value, attn_mask},
        {.reals = {dropout_p}, .flag = is_causal}, [=](const LocalCall& c) {
          return std::vector{scaled_dot_product_attention(c.in[0], c.in[1], c.in[2], c.in[3],
                                                          dropout_p, is_causal, scale, gen)};
        });
  }
  const char* op = "scaled_dot_product_attention";
  check_floating(query, op, "query");
  TS_CHECK_DTYPE(key.dtype() == query.dtype() && value.dtype() == query.dtype(), "[", op,
                 "] expected query, key and value of one dtype, got ", query.dtype(), ", ",
                 key.dtype(), " and ", value.dtype());
  check_same_device(key, query, op, "key");
  check_same_device(value, query, op, "value");
  TS_CHECK_SHAPE(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, "[", op,
                 "] expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got ",
                 query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  const int64_t l = query.size(-2);
  const int64_t e = query.size(-1);
  const int64_t s = key.size(-2);
  TS_CHECK_SHAPE(key.size(-1) == e && value.size(-2) == s, "[", op,
                 "] expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got ",
                 query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TS_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "[", op, "] dropout_p must be in [0, 1], got ",
           dropout_p);
  TS_CHECK(!(is_causal && attn_mask.defined()), "[", op,
           "] attn_mask must not be given when is_causal is true");
  if (attn_mask.defined()) {
    TS_CHECK_DTYPE(attn_mask.dtype() == kBool || is_floating_point(attn_mask.dtype()), "[", op,
                   "] expected a bool or floating attn_mask, got ", attn_mask.dtype());
    check_same_device(attn_mask, query, op, "attn_mask");
  }

  // As PyTorch's math path: q and k are each scaled by sqrt(scale), which keeps the logits'
  // rounding in float16 / bfloat16 moderate.
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(e)));
  const double root = std::sqrt(std::abs(sc));
  Tensor attn = matmul(mul(query, sc < 0 ? -root : root), mul(key.transpose(-2, -1), root));
  const TensorOptions opts = TensorOptions().dtype(attn.dtype()).device(attn.device());
  const Tensor neg_inf = full({}, -std::numeric_limits<double>::infinity(), opts);

  Tensor mask = attn_mask;
  if (is_causal) {  // keep the lower triangle, aligned to the top-left corner as torch.tril
    Tensor causal = Tensor::make_empty({l, s}, kBool, Device::cpu());
    bool* c = causal.data_ptr<bool>();
    for (int64_t i = 0; i < l; ++i) {
      for (int64_t j = 0; j < s; ++j) c[i * s + j] = j <= i;
    }
    mask = causal.to(attn.device());
  }
  if (mask.defined()) {
    TS_CHECK_SHAPE(broadcasts_to(mask.sizes(), attn.sizes()), "[", op, "] attn_mask of shape ",
                   mask.sizes(), " does not broadcast to the attention weights' shape ",
                   attn.sizes(), " ([..., L, S])");
    attn = mask.dtype() == kBool ? where(mask, attn, neg_inf) : attn + mask.to(attn.dtype());
  }
  Tensor weights;
  if (!mask.defined()) {
    weights = softmax(attn, -1);
  } else {
    // PyTorch's _safe_softmax: a row masked out entirely attends to nothing (zeros), not NaN.
    // Such rows are zeroed before the softmax too, so that its gradient there is 0, not NaN.
    // Without a mask a row is all -inf only for infinite inputs, so the check is skipped there.
    Tensor dead;
    {
      NoGradGuard no_grad;  // a bool mask: nothing to differentiate
      dead = eq(amax(attn, {-1}, true), neg_inf);
    }
    const Tensor zero = full({}, 0.0, opts);
    weights = where(dead, zero, softmax(where(dead, zero, attn), -1));
  }
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true, gen);
  return matmul(weights, value);
}

}  // namespace tessera
