#pragma once
// The autograd slots of the differentiable reductions (runtime/ops/reduction.cpp), one per entry
// point with its signature; filled by autograd/formulas/reduction.cpp. argmax / argmin are not
// differentiable and have none. See Note [Recording ops for autograd] in runtime/autograd_hooks.h.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/runtime/dtype.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

struct ReductionGradHooks {
  Tensor (*sum)(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
                std::optional<DType> dtype) = nullptr;
  Tensor (*prod)(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) = nullptr;
  Tensor (*mean)(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) = nullptr;
  Tensor (*amax)(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) = nullptr;
  Tensor (*amin)(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) = nullptr;
  Tensor (*max_all)(const Tensor& a) = nullptr;
  Tensor (*min_all)(const Tensor& a) = nullptr;
  std::pair<Tensor, Tensor> (*max_dim)(const Tensor& a, int64_t dim, bool keepdim) = nullptr;
  std::pair<Tensor, Tensor> (*min_dim)(const Tensor& a, int64_t dim, bool keepdim) = nullptr;
  Tensor (*var)(const Tensor& a, const std::vector<int64_t>& dims, double correction,
                bool keepdim) = nullptr;
  Tensor (*norm)(const Tensor& a, double p, const std::vector<int64_t>& dims,
                 bool keepdim) = nullptr;
};

// Defined in autograd/formulas/reduction.cpp.
void install_grad_hooks(ReductionGradHooks& hooks);

}  // namespace tessera
