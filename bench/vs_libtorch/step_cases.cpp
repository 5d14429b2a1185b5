// Training-step cases: the MLP step of issue 19 and its parts, and one pre-norm transformer
// block (causal attention written out with matmul and softmax, GELU MLP) forward + backward.
// Gradients come from autograd::grad on both sides, so nothing accumulates across calls.

#include <memory>

#include "bench/training_steps.h"
#include "bench/vs_libtorch/cases.h"

namespace tessera::bench::vs_libtorch {

namespace {

using namespace steps;

// Leaves with the same values on both sides.
struct Leaves {
  std::vector<Tensor> ts;
  std::vector<torch::Tensor> torch;

  void add(const Shape& shape, double scale, bool requires_grad = true) {
    Tensor t = (randn(shape) * scale).requires_grad_(requires_grad);
    torch.push_back(to_torch(t).requires_grad_(requires_grad));
    ts.push_back(t);
  }
};

// ---- the MLP step (bench/training_steps.h) ----

struct MlpState {
  Leaves leaves;  // X, W1, W2
  Tensor labels;
  torch::Tensor torch_labels;
  std::vector<Tensor> out;
  std::vector<torch::Tensor> torch_out;
};

std::shared_ptr<MlpState> mlp_state() {
  auto s = std::make_shared<MlpState>();
  for (const LeafSpec& spec : mlp_leaf_specs()) {
    s->leaves.add(Shape(spec.shape), spec.scale, spec.requires_grad);
  }
  s->labels = randint(0, kClasses, {kRows});
  s->torch_labels = to_torch(s->labels);
  return s;
}

Case mlp_step() {
  auto s = mlp_state();
  Case c{"MLP step: cross_entropy(gelu(X W1) W2) fwd+bwd", 0.8, nullptr, nullptr, nullptr};
  c.product_flops = kMlpStepFlops;
  c.tessera = [s] {
    const auto& l = s->leaves.ts;
    Tensor loss = mlp_loss(l[0], l[1], l[2], s->labels);
    s->out = autograd::grad({loss}, {l[1], l[2]});
  };
  c.libtorch = [s] {
    const auto& l = s->leaves.torch;
    torch::Tensor loss = torch::nn::functional::cross_entropy(
        torch::matmul(torch::gelu(torch::matmul(l[0], l[1])), l[2]), s->torch_labels);
    s->torch_out = torch::autograd::grad({loss}, {l[1], l[2]});
  };
  c.max_rel_diff = [s] {
    return std::max(relative_difference(s->out[0], s->torch_out[0]),
                    relative_difference(s->out[1], s->torch_out[1]));
  };
  return c;
}

// Two operands and a result on each side.
struct Pair {
  Tensor a, b, out;
  torch::Tensor ta, tb, tout;
};

std::shared_ptr<Pair> pair(const Shape& a, const Shape& b) {
  auto p = std::make_shared<Pair>();
  p->a = randn(a);
  p->b = randn(b);
  p->ta = to_torch(p->a);
  p->tb = to_torch(p->b);
  return p;
}

Case mlp_forward_mm() {
  auto p = pair({kRows, kIn}, {kIn, kHidden});
  return {"MLP part: X W1 (256x512 @ 512x1024)", 1.0, [p] { p->out = matmul(p->a, p->b); },
          [p] { p->tout = torch::matmul(p->ta, p->tb); },
          [p] { return relative_difference(p->out, p->tout); }};
}

Case mlp_weight_grad_mm() {
  auto p = pair({kRows, kIn}, {kRows, kHidden});
  return {"MLP part: X^T dH (512x256 @ 256x1024)", 1.0, [p] { p->out = matmul(p->a.t(), p->b); },
          [p] { p->tout = torch::matmul(p->ta.t(), p->tb); },
          [p] { return relative_difference(p->out, p->tout); }};
}

Case mlp_gelu_forward() {
  auto p = pair({kRows, kHidden}, {kRows, kHidden});
  return {"MLP part: gelu forward (256x1024)", 1.0, [p] { p->out = gelu(p->a); },
          [p] { p->tout = torch::gelu(p->ta); },
          [p] { return relative_difference(p->out, p->tout); }};
}

Case mlp_gelu_backward() {
  auto p = pair({kRows, kHidden}, {kRows, kHidden});
  p->a.requires_grad_(true);
  p->ta.requires_grad_(true);
  return {"MLP part: gelu forward+backward (256x1024)", 1.0,
          [p] { p->out = autograd::grad({gelu(p->a)}, {p->a}, {p->b})[0]; },
          [p] { p->tout = torch::autograd::grad({torch::gelu(p->ta)}, {p->ta}, {p->tb})[0]; },
          [p] { return relative_difference(p->out, p->tout); }};
}

// ---- the transformer block (bench/training_steps.h) ----

Leaves block_leaves() {
  Leaves l;
  for (const LeafSpec& spec : block_leaf_specs()) {
    l.add(Shape(spec.shape), spec.scale, spec.requires_grad);
  }
  return l;
}

struct TorchOps {
  torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b) const {
    return torch::layer_norm(x, {kModel}, w, b);
  }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b) const {
    return torch::linear(x, w, b);
  }
  torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b) const {
    return torch::matmul(a, b);
  }
  torch::Tensor softmax(const torch::Tensor& a) const { return torch::softmax(a, -1); }
  torch::Tensor gelu(const torch::Tensor& a) const { return torch::gelu(a); }
};

struct BlockState {
  Leaves leaves;
  Tensor mask;
  torch::Tensor torch_mask;
  std::vector<Tensor> out;
  std::vector<torch::Tensor> torch_out;
};

Case block_step() {
  auto s = std::make_shared<BlockState>();
  s->leaves = block_leaves();
  s->mask = from_vector(causal_mask_values(), {kSeq, kSeq});
  s->torch_mask = to_torch(s->mask);
  Case c{"transformer block step fwd+bwd (8x64, hidden 256, 8 heads)", 0.8, nullptr, nullptr,
         nullptr};
  c.product_flops = kBlockStepFlops;
  c.tessera = [s] {
    s->out = autograd::grad({block_loss(s->leaves.ts, s->mask, TesseraOps{})}, s->leaves.ts);
  };
  c.libtorch = [s] {
    s->torch_out = torch::autograd::grad({block_loss(s->leaves.torch, s->torch_mask, TorchOps{})},
                                         s->leaves.torch);
  };
  c.max_rel_diff = [s] {
    double worst = 0.0;
    for (size_t i = 0; i < s->out.size(); ++i) {
      worst = std::max(worst, relative_difference(s->out[i], s->torch_out[i]));
    }
    return worst;
  };
  return c;
}

}  // namespace

std::vector<Case> step_cases() {
  std::vector<Case> cases;
  cases.push_back(mlp_step());
  cases.push_back(mlp_forward_mm());
  cases.push_back(mlp_weight_grad_mm());
  cases.push_back(mlp_gelu_forward());
  cases.push_back(mlp_gelu_backward());
  cases.push_back(block_step());
  return cases;
}

}  // namespace tessera::bench::vs_libtorch
