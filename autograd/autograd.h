#pragma once
// Public autograd entry points (API.md §2): torch.autograd.backward and torch.autograd.grad.
// Tensor::backward and the other Tensor methods are declared in runtime/tensor.h.

#include <optional>
#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

struct GradOptions {
  // Keep the graph's saved tensors for another backward; defaults to create_graph.
  std::optional<bool> retain_graph = std::nullopt;
  // Record the backward pass itself, for higher-order derivatives.
  bool create_graph = false;
  // An input the outputs do not depend on gets an undefined gradient instead of an Error.
  bool allow_unused = false;
};

// Gradients of sum_i <outputs[i], grad_outputs[i]> with respect to each input, without touching
// any .grad(). grad_outputs may be empty (or hold undefined tensors) for one-element outputs.
// Errors: an output or input that does not require grad; a missing grad_output for an output of
// more than one element; a grad_output whose shape differs from its output's; an input not
// reached from the outputs (unless allow_unused).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, GradOptions options = {});

// Accumulates the gradients of sum_i <tensors[i], grad_tensors[i]> into the .grad() of the leaves;
// Tensor::backward for several roots at once. Errors as grad.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              BackwardOptions options = {});

}  // namespace tessera::autograd
