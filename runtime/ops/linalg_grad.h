#pragma once
// The autograd slots of matmul, mm and bmm (runtime/ops/linalg.cpp), with their signatures;
// filled by autograd/formulas/linalg.cpp. linear records as its parts (matmul, add) when it must.
// See Note [Recording ops for autograd] in runtime/autograd_hooks.h.

#include "tessera/runtime/tensor.h"

namespace tessera {

struct LinalgGradHooks {
  Tensor (*matmul)(const Tensor& a, const Tensor& b) = nullptr;
  Tensor (*mm)(const Tensor& a, const Tensor& b) = nullptr;
  Tensor (*bmm)(const Tensor& a, const Tensor& b) = nullptr;
  // linear with weight [N, K] and bias [N] of x's dtype, the product and bias as one op.
  Tensor (*linear)(const Tensor& x, const Tensor& weight, const Tensor& bias) = nullptr;
};

// Defined in autograd/formulas/linalg.cpp.
void install_grad_hooks(LinalgGradHooks& hooks);

}  // namespace tessera
