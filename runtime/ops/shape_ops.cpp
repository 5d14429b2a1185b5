// Shape ops that build new tensors from several inputs: cat, stack; and the flatten free function.
// cat and stack record through ShapeGradHooks when an input requires grad.

#include "runtime/autograd_hooks.h"
#include "runtime/distributed.h"
#include "runtime/ops.h"
#include "runtime/ops/view_grad.h"

namespace tessera {

namespace {

// torch.cat still accepts 1-D tensors of shape [0] next to tensors of any rank and skips them
// (a legacy rule kept for compatibility).
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (any_distributed(tensors)) {
    return distributed_op("cat", tensors, {.ints = {dim}},
                          [dim](const LocalCall& c) { return std::vector{cat(c.in, dim)}; });
  }
  if (any_requires_grad(tensors)) return grad_hooks<ShapeGradHooks>().cat(tensors, dim);
  TS_CHECK(!tensors.empty(), "[cat] expects a non-empty list of tensors");
  DType dtype = tensors[0].dtype();
  const Tensor* ref = nullptr;  // the first tensor that is not skipped
  size_t ref_index = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), "[cat] tensor ", i, " is undefined");
    TS_CHECK_SHAPE(t.dim() > 0, "[cat] zero-dimensional tensor (at position ", i,
                   ") cannot be concatenated; unsqueeze it or use stack");
    TS_CHECK_T(DeviceError, t.device() == tensors[0].device(), "[cat] expects all tensors on one ",
               "device, but tensor ", i, " is on ", t.device(), " and tensor 0 on ",
               tensors[0].device());
    dtype = promote_types(dtype, t.dtype());
    if (!ref && !skipped_by_cat(t)) {
      ref = &t;
      ref_index = i;
    }
  }
  if (!ref) return Tensor::make_empty({0}, dtype, tensors[0].device());

  const int64_t d = wrap_dim(dim, ref->dim(), "cat");
  Shape out_shape = ref->sizes();
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_by_cat(t)) continue;
    TS_CHECK_SHAPE(t.dim() == ref->dim(),
                   "[cat] tensors must have the same number of dimensions: ", "tensor ", ref_index,
                   " has shape ", ref->sizes(), " but tensor ", i, " has shape ", t.sizes());
    for (int64_t k = 0; k < t.dim(); ++k) {
      TS_CHECK_SHAPE(k == d || t.size(k) == ref->size(k), "[cat] sizes of tensors must match ",
                     "except in dimension ", d, ": tensor ", ref_index, " has shape ", ref->sizes(),
                     " but tensor ", i, " has shape ", t.sizes(), " (mismatch in dimension ", k,
                     ")");
    }
    out_shape[d] += t.size(d);
  }

  // One allocation; each input is copied (and converted) straight into its slice of the output.
  Tensor out = Tensor::make_empty(out_shape, dtype, ref->device());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped_by_cat(t) || t.size(d) == 0) continue;
    out.narrow(d, offset, t.size(d)).copy_(t);
    offset += t.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (any_distributed(tensors)) {
    return distributed_op("stack", tensors, {.ints = {dim}},
                          [dim](const LocalCall& c) { return std::vector{stack(c.in, dim)}; });
  }
  if (any_requires_grad(tensors)) return grad_hooks<ShapeGradHooks>().stack(tensors, dim);
  TS_CHECK(!tensors.empty(), "[stack] expects a non-empty list of tensors");
  TS_CHECK(tensors[0].defined(), "[stack] tensor 0 is undefined");
  const Shape& shape = tensors[0].sizes();
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].defined(), "[stack] tensor ", i, " is undefined");
    TS_CHECK_SHAPE(tensors[i].sizes() == shape, "[stack] expects each tensor to be equal size, ",
                   "but got ", shape, " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
    expanded.push_back(tensors[i].unsqueeze(d));
  }
  return cat(expanded, d);
}

// Records through Tensor::flatten (a reshape).
Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  return a.flatten(start_dim, end_dim);
}

}  // namespace tessera
