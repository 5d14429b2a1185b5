#include "tessera/autograd/gradcheck.h"

#include <cmath>

#include "tessera/autograd/autograd.h"
#include "tessera/runtime/ops.h"

namespace tessera::autograd {

namespace {

// Jacobians indexed [input][input element][output element] (all outputs flattened in order).
using Jacobians = std::vector<std::vector<std::vector<double>>>;

std::vector<double> flat_outputs(const std::vector<Tensor>& outputs) {
  std::vector<double> flat;
  for (const Tensor& o : outputs) {
    std::vector<double> v = o.detach().to_vector<double>();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

void check_inputs(const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    TS_CHECK_DTYPE(t.dtype() == kFloat64, "[gradcheck] input ", i,
                   " requires grad and must be float64 for finite differences, got ", t.dtype());
    TS_CHECK(t.device().is_cpu(), "[gradcheck] input ", i, " is on ", t.device(),
             "; gradcheck runs on CPU");
  }
}

Jacobians numerical(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps,
                    size_t n_out) {
  // Leaf copies, so that perturbing them leaves the caller's tensors alone; they keep
  // requires_grad because fn may differentiate internally (gradgradcheck).
  std::vector<Tensor> copies;
  for (const Tensor& t : inputs) {
    if (!t.defined() || !t.requires_grad()) {
      copies.push_back(t);
      continue;
    }
    Tensor c = t.detach().clone();
    c.requires_grad_();
    copies.push_back(c);
  }
  Jacobians jac(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    double* p = copies[i].data_ptr<double>();
    jac[i].assign(static_cast<size_t>(inputs[i].numel()), std::vector<double>(n_out));
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      const double x = p[j];
      p[j] = x + eps;
      std::vector<double> plus = flat_outputs(fn(copies));
      p[j] = x - eps;
      std::vector<double> minus = flat_outputs(fn(copies));
      p[j] = x;
      for (size_t k = 0; k < n_out; ++k) jac[i][j][k] = (plus[k] - minus[k]) / (2 * eps);
    }
  }
  return jac;
}

Jacobians analytical(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                     size_t n_out) {
  std::vector<Tensor> diff_inputs;
  std::vector<size_t> index;
  Jacobians jac(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    diff_inputs.push_back(inputs[i]);
    index.push_back(i);
    jac[i].assign(static_cast<size_t>(inputs[i].numel()), std::vector<double>(n_out));
  }
  size_t column = 0;
  for (const Tensor& out : outputs) {
    const int64_t n = out.numel();
    for (int64_t k = 0; k < n; ++k, ++column) {
      if (!out.requires_grad()) continue;  // a non-differentiable output: zero column
      std::vector<double> unit(static_cast<size_t>(n), 0.0);
      unit[static_cast<size_t>(k)] = 1.0;
      Tensor v = from_vector(unit, out.shape()).to(out.dtype());
      std::vector<Tensor> grads =
          grad({out}, diff_inputs, {v}, {.retain_graph = true, .allow_unused = true});
      for (size_t d = 0; d < grads.size(); ++d) {
        if (!grads[d].defined()) continue;
        std::vector<double> g = grads[d].to_vector<double>();
        for (size_t j = 0; j < g.size(); ++j) jac[index[d]][j][column] = g[j];
      }
    }
  }
  return jac;
}

}  // namespace

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions options) {
  check_inputs(inputs);
  const std::vector<Tensor> outputs = fn(inputs);
  const size_t n_out = flat_outputs(outputs).size();
  const Jacobians num = numerical(fn, inputs, options.eps, n_out);
  const Jacobians ana = analytical(outputs, inputs, n_out);
  for (size_t i = 0; i < num.size(); ++i) {
    for (size_t j = 0; j < num[i].size(); ++j) {
      for (size_t k = 0; k < n_out; ++k) {
        const double n = num[i][j][k];
        const double a = ana[i][j][k];
        TS_CHECK(std::abs(a - n) <= options.atol + options.rtol * std::abs(n),
                 "[gradcheck] Jacobian mismatch for input ", i, ", input element ", j,
                 ", output element ", k, ": numerical ", n, " vs analytical ", a, " (atol ",
                 options.atol, ", rtol ", options.rtol, ")");
      }
    }
  }
  return true;
}

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions options) {
  return gradcheck(
      GradcheckFn([&](const std::vector<Tensor>& xs) { return std::vector<Tensor>{fn(xs)}; }),
      inputs, options);
}

bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& grad_outputs, GradcheckOptions options) {
  check_inputs(inputs);
  std::vector<Tensor> vs = grad_outputs;
  if (vs.empty()) {
    Generator gen(0);
    for (const Tensor& out : fn(inputs)) vs.push_back(randn(out.shape(), kFloat64, &gen));
  }
  std::vector<size_t> diff;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) diff.push_back(i);
  }
  // The checked function takes inputs followed by the vs.
  GradcheckFn grad_fn = [&](const std::vector<Tensor>& xs) {
    std::vector<Tensor> ins(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(inputs.size()));
    std::vector<Tensor> v(xs.begin() + static_cast<std::ptrdiff_t>(inputs.size()), xs.end());
    std::vector<Tensor> wrt;
    for (size_t i : diff) wrt.push_back(ins[i]);
    std::vector<Tensor> grads =
        grad(fn(ins), wrt, v, {.retain_graph = true, .create_graph = true, .allow_unused = true});
    for (size_t d = 0; d < grads.size(); ++d) {
      if (!grads[d].defined()) grads[d] = zeros_like(wrt[d]);
    }
    return grads;
  };
  std::vector<Tensor> all = inputs;
  for (const Tensor& v : vs) {
    Tensor leaf = v.detach().to(kFloat64).clone();
    leaf.requires_grad_();
    all.push_back(leaf);
  }
  return gradcheck(grad_fn, all, options);
}

bool gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                   const std::vector<Tensor>& inputs, const std::vector<Tensor>& grad_outputs,
                   GradcheckOptions options) {
  return gradgradcheck(
      GradcheckFn([&](const std::vector<Tensor>& xs) { return std::vector<Tensor>{fn(xs)}; }),
      inputs, grad_outputs, options);
}

}  // namespace tessera::autograd
