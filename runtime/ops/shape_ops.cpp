// Shape ops that build new tensors from several inputs: cat, stack; and the flatten free function.
// cat and stack record through ShapeGradHooks when an input requires grad.

#include <algorithm>

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/join_shapes.h"
#include "tessera/runtime/ops/view_grad.h"

namespace tessera {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (any_distributed(tensors)) {
    return distributed_op("cat", tensors, {.ints = {dim}},
                          [dim](const LocalCall& c) { return std::vector{cat(c.in, dim)}; });
  }
  if (any_requires_grad(tensors)) return grad_hooks<ShapeGradHooks>().cat(tensors, dim);
  TS_CHECK(!tensors.empty(), "[cat] expects a non-empty list of tensors");
  DType dtype = tensors[0].dtype();
  std::vector<Shape> shapes;
  shapes.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), "[cat] tensor ", i, " is undefined");
    TS_CHECK_T(DeviceError, t.device() == tensors[0].device(), "[cat] expects all tensors on one ",
               "device, but tensor ", i, " is on ", t.device(), " and tensor 0 on ",
               tensors[0].device());
    dtype = promote_types(dtype, t.dtype());
    shapes.push_back(t.sizes());
  }
  const Shape out_shape = detail::cat_shape(shapes, dim);
  const auto ref = std::find_if(tensors.begin(), tensors.end(),
                                [](const Tensor& t) { return !detail::skipped_by_cat(t.sizes()); });
  if (ref == tensors.end()) return Tensor::make_empty({0}, dtype, tensors[0].device());
  const int64_t d = wrap_dim(dim, ref->dim(), "cat");

  // One allocation; each input is copied (and converted) straight into its slice of the output.
  Tensor out = Tensor::make_empty(out_shape, dtype, ref->device());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (detail::skipped_by_cat(t.sizes()) || t.size(d) == 0) continue;
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
  std::vector<Shape> shapes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].defined(), "[stack] tensor ", i, " is undefined");
    shapes.push_back(tensors[i].sizes());
  }
  (void)detail::stack_shape(shapes, dim);
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(d));
  return cat(expanded, d);
}

// Records through Tensor::flatten (a reshape).
Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  return a.flatten(start_dim, end_dim);
}

}  // namespace tessera
