#include "tessera/dtensor/view_geometry.h"

#include <cstring>
#include <vector>

#include "tessera/runtime/grad_mode.h"

namespace tessera::dtensor {

ViewGeometry global_view_geometry(const char* op, const Tensor& input, const Shape& out_shape,
                                  const LocalOp& local, const LocalLayout& layout) {
  const TensorImpl& global = *input.unsafe_impl();
  const bool reshapes = std::strcmp(op, "view") == 0 || std::strcmp(op, "reshape") == 0;
  if (reshapes && !view_strides(global.sizes, global.strides, out_shape).has_value()) {
    return {contiguous_strides(out_shape), std::nullopt};
  }
  NoGradGuard no_grad;
  const std::vector<Tensor> probe{
      Tensor::make_view(global.storage, global.sizes, global.strides, global.offset, global.dtype)};
  const std::vector<Shape> shapes{out_shape};
  const Tensor viewed = local(LocalCall{probe, shapes, layout}).at(0);
  TS_INTERNAL_ASSERT(viewed.sizes() == out_shape, "[", op, "] the view of the global geometry has ",
                     "shape ", viewed.sizes(), ", the rule gives ", out_shape);
  return {viewed.strides(), viewed.storage_offset() - global.offset};
}

}  // namespace tessera::dtensor
