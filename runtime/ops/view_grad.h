#pragma once
// Autograd slots of the view, conversion and shape families (see Note [Recording ops for
// autograd] in runtime/autograd_hooks.h). Each slot has the signature of its entry point, with
// the tensor a method runs on as the first argument. Composite entry points (narrow, flatten,
// chunk, split, unbind, contiguous, zero_) have no slot: the ops they are made of record.

#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera {

// Views (runtime/views.cpp): the slot's result shares self's storage and is marked as a view.
struct ViewGradHooks {
  Tensor (*view)(const Tensor& self, const Shape& sizes) = nullptr;
  Tensor (*reshape)(const Tensor& self, const Shape& sizes) = nullptr;
  Tensor (*transpose)(const Tensor& self, int64_t a, int64_t b) = nullptr;
  Tensor (*t)(const Tensor& self) = nullptr;
  Tensor (*permute)(const Tensor& self, const Shape& dims) = nullptr;
  Tensor (*select)(const Tensor& self, int64_t dim, int64_t index) = nullptr;
  Tensor (*slice)(const Tensor& self, int64_t dim, int64_t start, int64_t end,
                  int64_t step) = nullptr;
  Tensor (*unsqueeze)(const Tensor& self, int64_t dim) = nullptr;
  Tensor (*squeeze)(const Tensor& self) = nullptr;
  Tensor (*squeeze_dim)(const Tensor& self, int64_t dim) = nullptr;
  Tensor (*expand)(const Tensor& self, const Shape& sizes) = nullptr;
};

// Conversions and copies (runtime/tensor.cpp).
struct ConvertGradHooks {
  Tensor (*to_dtype)(const Tensor& self, DType dtype) = nullptr;
  Tensor (*to_device)(const Tensor& self, Device device) = nullptr;
  Tensor (*clone)(const Tensor& self) = nullptr;
  Tensor& (*copy_)(Tensor& self, const Tensor& src) = nullptr;
  Tensor& (*fill_)(Tensor& self, const Scalar& value) = nullptr;
};

// Ops that join several tensors (runtime/ops/shape_ops.cpp).
struct ShapeGradHooks {
  Tensor (*cat)(const std::vector<Tensor>& tensors, int64_t dim) = nullptr;
  Tensor (*stack)(const std::vector<Tensor>& tensors, int64_t dim) = nullptr;
};

// Defined in autograd/formulas/views.cpp, autograd/formulas/views_convert.cpp and
// autograd/formulas/shape.cpp.
void install_grad_hooks(ViewGradHooks& hooks);
void install_grad_hooks(ConvertGradHooks& hooks);
void install_grad_hooks(ShapeGradHooks& hooks);

}  // namespace tessera
