#pragma once
// TensorOptions: chainable creation options, as torch::TensorOptions.

#include "tessera/runtime/device.h"
#include "tessera/runtime/dtype.h"

namespace tessera {

struct TensorOptions {
  DType dtype_ = kFloat32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;

  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}    // NOLINT: implicit, so factories accept a dtype
  TensorOptions(Device d) : device_(d) {}  // NOLINT

  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool b = true) const {
    auto o = *this;
    o.requires_grad_ = b;
    return o;
  }
};

}  // namespace tessera
