// The backward entry points of softmax, the norms and cross_entropy (runtime/ops/nn_internal.h).
//
// Note [Fused nn backward]
// Composed of runtime ops, these gradients read and write a full tensor per op: softmax's four,
// layer_norm's about a dozen (with three row means), cross_entropy's ten with a one-hot target.
// Each is instead one kernel pass per row (KernelTable::softmax_backward, norm_backward,
// cross_entropy_backward): the row's sums and its gradient while the row is in cache, and the
// weight and bias sums of a norm in the same pass (on CUDA in a second kernel over columns, see
// kernels/cuda/norm.cu). The composed formulas stay: under create_graph, or when grad or a saved
// tensor requires grad, the formula must record so that its result differentiates again; and on
// a device whose table lacks the kernels. Otherwise (fused_applies, as
// Note [Fused pointwise backward]) the formula calls these, whose results equal the composed
// ones up to rounding.

#include <vector>

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/elementwise_grad.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera::detail {

bool has_fused_nn_backward(const Tensor& t) {
  const KernelTable& k = kernels_for(t, "nn backward");
  return k.softmax_backward && k.norm_backward && k.cross_entropy_backward;
}

namespace {

// out = the gradient of softmax (log_softmax) along dim from g, of y's shape and dtype; out may
// be g (the row kernels read a row's gradient before writing it).
Tensor softmax_backward_into(Tensor out, const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  const int64_t d = wrap_dim(dim, y.dim(), op);
  if (out.numel() > 0) kernels_for(y, op).softmax_backward(out, g, y, d, log);
  return out;
}

}  // namespace

Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  TS_CHECK_SHAPE(grad.sizes() == y.sizes(), "[", op, "] expected grad of the result's shape ",
                 y.sizes(), ", got ", grad.sizes());
  if (y.dim() == 0) {  // a row of one, as the forward
    wrap_dim(dim, 0, op);
    return softmax_backward(grad.reshape({1}), y.reshape({1}), 0, log).reshape({});
  }
  const Tensor g = grad.dtype() == y.dtype() ? grad : grad.to(y.dtype());
  return softmax_backward_into(Tensor::make_empty(y.sizes(), y.dtype(), y.device()), g, y, dim,
                               log);
}

Tensor softmax_backward(Tensor&& grad, const Tensor& y, int64_t dim, bool log) {
  if (y.dim() == 0 || !gradient_reusable(grad, y.sizes(), y.dtype())) {
    return softmax_backward(static_cast<const Tensor&>(grad), y, dim, log);
  }
  Tensor out = std::move(grad);
  return softmax_backward_into(out, out, y, dim, log);
}

NormGrads norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd, int64_t norm_ndim,
                        std::array<bool, 3> wanted) {
  const char* op = mean.defined() ? "layer_norm_backward" : "rms_norm_backward";
  TS_CHECK_SHAPE(grad.sizes() == x.sizes(), "[", op, "] expected grad of the input's shape ",
                 x.sizes(), ", got ", grad.sizes());
  const Shape norm_shape(x.sizes().end() - norm_ndim, x.sizes().end());
  // Parameter gradients in the weight's dtype (the bias has it too in every norm module); the
  // engine casts a gradient whose slot differs.
  const DType param_dtype = weight.defined() ? weight.dtype() : x.dtype();
  NormGrads out;
  if (wanted[0]) out.input = Tensor::make_empty(x.sizes(), x.dtype(), x.device());
  for (int i : {1, 2}) {
    if (!wanted[static_cast<size_t>(i)]) continue;
    Tensor& p = i == 1 ? out.weight : out.bias;
    p = Tensor::make_empty(norm_shape, param_dtype, x.device());
    if (x.numel() == 0) p.fill_(0);  // an empty sum
  }
  if (x.numel() > 0) {
    const Tensor g = (grad.dtype() == x.dtype() ? grad : grad.to(x.dtype())).contiguous();
    kernels_for(x, op).norm_backward(out.input, out.weight, out.bias, g, x.contiguous(), weight,
                                     mean, rstd);
  }
  return out;
}

Shape class_dim_last(int64_t dims) {
  Shape perm{0};
  for (int64_t d = 2; d < dims; ++d) perm.push_back(d);
  perm.push_back(1);
  return perm;
}

Tensor cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target,
                              const CrossEntropyOptions& options) {
  const char* op = "cross_entropy_backward";
  // Rows [n, C] with the class dim last, as the forward: [C] -> [1, C]; [N, C, d...] ->
  // [N * prod(d), C].
  const int64_t c = logits.dim() == 1 ? logits.size(0) : logits.size(1);
  const Shape perm = logits.dim() > 2 ? class_dim_last(logits.dim()) : Shape{};
  const Tensor moved = logits.dim() > 2 ? logits.permute(perm) : logits;
  const Tensor rows = moved.reshape({-1, c}).contiguous();
  const int64_t n = rows.size(0);
  const Tensor flat_target = target.reshape({n}).contiguous();
  double scale = 1.0;
  if (options.reduction == Reduction::Mean) {
    // No counted target: the forward is nan, and no logit gets a gradient (as PyTorch).
    const Tensor ignore =
        full({}, options.ignore_index, TensorOptions().dtype(kInt64).device(logits.device()));
    const double counted = sum(ne(flat_target, ignore)).item<double>();
    scale = counted > 0 ? 1.0 / counted : 0.0;
  }
  Tensor g = grad.dtype() == logits.dtype() ? grad : grad.to(logits.dtype());
  g = (options.reduction == Reduction::None && g.dim() > 0 ? g.reshape({n}) : g).contiguous();
  Tensor out = Tensor::make_empty(rows.sizes(), rows.dtype(), rows.device());
  if (out.numel() > 0) {
    kernels_for(logits, op)
        .cross_entropy_backward(out, rows, flat_target, g, scale, options.ignore_index,
                                options.label_smoothing);
  }
  if (logits.dim() <= 2) return out.view(logits.sizes());
  // Back from [n, C] to [N, d..., C] and the class dim to position 1.
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = int64_t(i);
  return out.view(moved.sizes()).permute(Shape(inverse.begin(), inverse.end()));
}

}  // namespace tessera::detail
