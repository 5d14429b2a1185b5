#include "tessera/runtime/ops/join_shapes.h"

#include "tessera/runtime/error.h"

namespace tessera::detail {

Shape cat_shape(const std::vector<Shape>& shapes, int64_t dim) {
  TS_CHECK(!shapes.empty(), "[cat] expects a non-empty list of tensors");
  const Shape* ref = nullptr;  // the first shape that is not skipped
  size_t ref_index = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    TS_CHECK_SHAPE(!shapes[i].empty(), "[cat] zero-dimensional tensor (at position ", i,
                   ") cannot be concatenated; unsqueeze it or use stack");
    if (ref == nullptr && !skipped_by_cat(shapes[i])) {
      ref = &shapes[i];
      ref_index = i;
    }
  }
  if (ref == nullptr) return Shape{0};
  const auto nd = static_cast<int64_t>(ref->size());
  const auto d = static_cast<size_t>(wrap_dim(dim, nd, "cat"));
  Shape out = *ref;
  out[d] = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (skipped_by_cat(s)) continue;
    TS_CHECK_SHAPE(s.size() == ref->size(), "[cat] tensors must have the same number of ",
                   "dimensions: tensor ", ref_index, " has shape ", *ref, " but tensor ", i,
                   " has shape ", s);
    for (size_t k = 0; k < s.size(); ++k) {
      TS_CHECK_SHAPE(k == d || s[k] == (*ref)[k], "[cat] sizes of tensors must match except in ",
                     "dimension ", d, ": tensor ", ref_index, " has shape ", *ref, " but tensor ",
                     i, " has shape ", s, " (mismatch in dimension ", k, ")");
    }
    out[d] += s[d];
  }
  return out;
}

Shape stack_shape(const std::vector<Shape>& shapes, int64_t dim) {
  TS_CHECK(!shapes.empty(), "[stack] expects a non-empty list of tensors");
  const Shape& shape = shapes[0];
  const auto d = wrap_dim(dim, static_cast<int64_t>(shape.size()) + 1, "stack");
  for (size_t i = 0; i < shapes.size(); ++i) {
    TS_CHECK_SHAPE(shapes[i] == shape, "[stack] expects each tensor to be equal size, but got ",
                   shape, " at entry 0 and ", shapes[i], " at entry ", i);
  }
  Shape out = shape;
  out.insert(out.begin() + d, static_cast<int64_t>(shapes.size()));
  return out;
}

}  // namespace tessera::detail
