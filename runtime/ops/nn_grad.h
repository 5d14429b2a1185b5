#pragma once
// Autograd slots of the nn functions (runtime/ops/nn.cpp, dropout in runtime/ops/random.cpp),
// filled by autograd/formulas/nn*.cpp. See Note [Recording ops for autograd] in
// runtime/autograd_hooks.h. scaled_dot_product_attention has no slot: it is composed of public
// ops, which record themselves.

#include <cstdint>
#include <optional>

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/ops.h"

namespace tessera {

struct NnGradHooks {
  Tensor (*softmax)(const Tensor& a, int64_t dim) = nullptr;
  Tensor (*log_softmax)(const Tensor& a, int64_t dim) = nullptr;
  Tensor (*layer_norm)(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                       const Tensor& bias, double eps) = nullptr;
  Tensor (*rms_norm)(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                     std::optional<double> eps) = nullptr;
  Tensor (*embedding)(const Tensor& weight, const Tensor& indices) = nullptr;
  // detail::embedding_backward (runtime/ops/nn_internal.h), recorded so that embedding has second
  // derivatives.
  Tensor (*embedding_backward)(const Tensor& grad, const Tensor& indices,
                               int64_t num_weights) = nullptr;
  Tensor (*cross_entropy)(const Tensor& logits, const Tensor& target,
                          CrossEntropyOptions options) = nullptr;
  // Only reached when dropout changes its input (train and p > 0).
  Tensor (*dropout)(const Tensor& a, double p, bool train, Generator* gen) = nullptr;
};

void install_grad_hooks(NnGradHooks& hooks);

}  // namespace tessera
