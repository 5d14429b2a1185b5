#pragma once
// Finite-difference checks of gradients (torch.autograd.gradcheck / gradgradcheck), on CPU.

#include <functional>
#include <vector>

#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   // central-difference step
  double atol = 1e-5;  // |analytical - numerical| <= atol + rtol * |numerical|
  double rtol = 1e-3;
};

using GradcheckFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Compares the Jacobian of fn at `inputs` computed by backward (one unit vector per output element)
// with central differences (each element of a copy of each input perturbed by +-eps). Inputs that
// require grad must be float64; the others are passed through. Returns true, or throws Error
// naming the first mismatch (output, input, elements, numerical and analytical values).
bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
               GradcheckOptions options = {});
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions options = {});

// gradcheck of the gradient of fn: the function (inputs, v) -> autograd::grad(fn(inputs), inputs,
// v, create_graph=true), with v (one float64 tensor per output; random when empty) checked as an
// input too. Needs fn's backward to record, i.e. to be built from differentiable ops.
bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& grad_outputs = {}, GradcheckOptions options = {});
bool gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                   const std::vector<Tensor>& inputs, const std::vector<Tensor>& grad_outputs = {},
                   GradcheckOptions options = {});

}  // namespace tessera::autograd
