// layer_norm and rms_norm over trailing dims.
//
// Note [Norm statistics in backward]
// The forward kernels leave each row's mean and rstd behind (detail::layer_norm_forward), and a
// first-order backward reuses them. Under create_graph the statistics must themselves be
// functions of x, else second derivatives would miss their dependence on it: there they are
// recomputed from x with differentiable ops.

#include <memory>
#include <vector>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/autograd/formulas/nn_formulas.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera::autograd {

namespace {

// Which dims of an input of shape x_shape are normalized (the last `k`) and which lead; and the
// keepdim shape of per-row statistics.
struct NormDims {
  std::vector<int64_t> norm;
  std::vector<int64_t> lead;
  Shape stat_shape;

  NormDims(const Shape& x_shape, int64_t k) {
    const int64_t ndim = x_shape.ndim();
    for (int64_t d = 0; d < ndim; ++d) {
      const bool normalized = d >= ndim - k;
      (normalized ? norm : lead).push_back(d);
      stat_shape.push_back(normalized ? 1 : x_shape[d]);
    }
  }

  // The gradient of a parameter of normalized_shape from its per-element product: summed over
  // the leading dims.
  Tensor sum_lead(const Tensor& t) const { return lead.empty() ? t : sum(t, lead); }
};

// Whether backward must differentiate through the statistics (Note [Norm statistics in
// backward]).
bool differentiable_stats(const Tensor& x) { return is_grad_enabled() && x.requires_grad(); }

class NativeLayerNormBackward final : public FormulaNode {
 public:
  NativeLayerNormBackward(int64_t k, double eps)
      : FormulaNode("NativeLayerNormBackward0"), k_(k), eps_(eps) {}
  SavedTensor input, weight, row_mean, row_rstd;

  // With xhat = (x - mean) * rstd and gw = g * weight:
  //   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), dweight = sum(g * xhat),
  //   dbias = sum(g), means over the normalized dims and sums over the leading ones.
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor xv = input.unpack(*this);
    const Tensor w = weight.unpack(*this);
    if (nn_fused_applies(g, xv, w)) {
      detail::NormGrads d =
          detail::norm_backward(g, xv, w, row_mean.unpack(*this), row_rstd.unpack(*this), k_,
                                {needs_input_grad(0), needs_input_grad(1), needs_input_grad(2)});
      return {d.input, d.weight, d.bias};
    }
    const NormDims dims(xv.sizes(), k_);
    Tensor xhat;
    Tensor r;
    if (differentiable_stats(xv)) {
      const Tensor centered = xv - mean(xv, dims.norm, /*keepdim=*/true);
      r = rsqrt(mean(centered * centered, dims.norm, /*keepdim=*/true) + eps_);
      xhat = centered * r;
    } else {
      r = row_rstd.unpack(*this).view(dims.stat_shape);
      xhat = (xv - row_mean.unpack(*this).view(dims.stat_shape)) * r;
    }
    std::vector<Tensor> out(3);
    if (needs_input_grad(0)) {
      const Tensor gw = w.defined() ? g * w : g;
      out[0] = r * (gw - mean(gw, dims.norm, true) - xhat * mean(gw * xhat, dims.norm, true));
    }
    if (needs_input_grad(1)) out[1] = dims.sum_lead(g * xhat);
    if (needs_input_grad(2)) out[2] = dims.sum_lead(g);
    return out;
  }
  void release_variables() override {
    input.release();
    weight.release();
    row_mean.release();
    row_rstd.release();
  }

 private:
  int64_t k_;
  double eps_;
};

class RmsNormBackward final : public FormulaNode {
 public:
  RmsNormBackward(int64_t k, double eps) : FormulaNode("RmsNormBackward0"), k_(k), eps_(eps) {}
  SavedTensor input, weight, row_rstd;

  // y = x * rstd * weight, rstd = (mean(x^2) + eps)^-1/2; with gw = g * weight:
  //   dx = rstd * (gw - x * rstd^2 * mean(gw * x)), dweight = sum(g * x * rstd).
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    const Tensor xv = input.unpack(*this);
    const Tensor w = weight.unpack(*this);
    if (nn_fused_applies(g, xv, w)) {
      detail::NormGrads d =
          detail::norm_backward(g, xv, w, Tensor(), row_rstd.unpack(*this), k_,
                                {needs_input_grad(0), needs_input_grad(1), false});
      return {d.input, d.weight};
    }
    const NormDims dims(xv.sizes(), k_);
    const Tensor r = differentiable_stats(xv)
                         ? rsqrt(mean(xv * xv, dims.norm, /*keepdim=*/true) + eps_)
                         : row_rstd.unpack(*this).view(dims.stat_shape);
    std::vector<Tensor> out(2);
    if (needs_input_grad(0)) {
      const Tensor gw = w.defined() ? g * w : g;
      out[0] = r * (gw - xv * (r * r) * mean(gw * xv, dims.norm, /*keepdim=*/true));
    }
    if (needs_input_grad(1)) out[1] = dims.sum_lead(g * (xv * r));
    return out;
  }
  void release_variables() override {
    input.release();
    weight.release();
    row_rstd.release();
  }

 private:
  int64_t k_;
  double eps_;
};

Tensor layer_norm_slot(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                       const Tensor& bias, double eps) {
  detail::NormForward f;
  {
    NoGradGuard no_grad;
    f = detail::layer_norm_forward(x, normalized_shape, weight, bias, eps);
  }
  auto node = std::make_shared<NativeLayerNormBackward>(normalized_shape.ndim(), eps);
  record(node, {x, weight, bias}, {&f.out});
  node->input = SavedTensor(x, false);
  node->weight = SavedTensor(weight, false);
  node->row_mean = SavedTensor(f.mean, false);
  node->row_rstd = SavedTensor(f.rstd, false);
  return f.out;
}

Tensor rms_norm_slot(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                     std::optional<double> eps) {
  detail::NormForward f;
  {
    NoGradGuard no_grad;
    f = detail::rms_norm_forward(x, normalized_shape, weight, eps);
  }
  auto node = std::make_shared<RmsNormBackward>(normalized_shape.ndim(),
                                                detail::rms_norm_eps(x.dtype(), eps));
  record(node, {x, weight}, {&f.out});
  node->input = SavedTensor(x, false);
  node->weight = SavedTensor(weight, false);
  node->row_rstd = SavedTensor(f.rstd, false);
  return f.out;
}

}  // namespace

void install_norm_grads(NnGradHooks& hooks) {
  hooks.layer_norm = layer_norm_slot;
  hooks.rms_norm = rms_norm_slot;
}

}  // namespace tessera::autograd
