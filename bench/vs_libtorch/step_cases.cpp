// Training-step cases: the MLP step of issue 19 and its parts, and one pre-norm transformer
// block (causal attention written out with matmul and softmax, GELU MLP) forward + backward.
// Gradients come from autograd::grad on both sides, so nothing accumulates across calls.

#include <cmath>
#include <limits>
#include <memory>

#include "bench/vs_libtorch/cases.h"

namespace tessera::bench::vs_libtorch {

namespace {

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

// ---- the MLP step: cross_entropy(gelu(X W1) W2, y), 256 x 512 x 1024 x 10 ----

constexpr int64_t kRows = 256, kIn = 512, kHidden = 1024, kClasses = 10;

struct MlpState {
  Leaves leaves;  // X, W1, W2
  Tensor labels;
  torch::Tensor torch_labels;
  std::vector<Tensor> out;
  std::vector<torch::Tensor> torch_out;
};

std::shared_ptr<MlpState> mlp_state() {
  auto s = std::make_shared<MlpState>();
  s->leaves.add({kRows, kIn}, 1.0, false);
  s->leaves.add({kIn, kHidden}, 1.0 / std::sqrt(double(kIn)));
  s->leaves.add({kHidden, kClasses}, 1.0 / std::sqrt(double(kHidden)));
  s->labels = randint(0, kClasses, {kRows});
  s->torch_labels = to_torch(s->labels);
  return s;
}

// FLOPs of an m x k @ k x n product.
constexpr double product_flops(int64_t m, int64_t k, int64_t n) {
  return 2.0 * double(m) * double(k) * double(n);
}

// The MLP step's products: X W1 and H W2 forward; dY W2^T, H^T dY and X^T dH backward (X takes
// no gradient).
constexpr double kMlpStepFlops =
    2 * product_flops(kRows, kIn, kHidden) + 3 * product_flops(kRows, kHidden, kClasses);

Case mlp_step() {
  auto s = mlp_state();
  Case c{"MLP step: cross_entropy(gelu(X W1) W2) fwd+bwd", 0.8, nullptr, nullptr, nullptr};
  c.product_flops = kMlpStepFlops;
  c.tessera = [s] {
    const auto& l = s->leaves.ts;
    Tensor loss = cross_entropy(matmul(gelu(matmul(l[0], l[1])), l[2]), s->labels);
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

// ---- a transformer block: batch 8 x 64 tokens, hidden 256, 8 heads, MLP 1024 ----

constexpr int64_t kBatch = 8, kSeq = 64, kModel = 256, kHeads = 8, kMlp = 1024;
constexpr int64_t kHeadDim = kModel / kHeads;

// Leaf order: x, ln1 weight, ln1 bias, Wqkv, bqkv, Wo, bo, ln2 weight, ln2 bias, W1, b1, W2, b2.
Leaves block_leaves() {
  Leaves l;
  const double s = 1.0 / std::sqrt(double(kModel));
  l.add({kBatch, kSeq, kModel}, 1.0);
  l.add({kModel}, 0.1);
  l.add({kModel}, 0.1);
  l.add({3 * kModel, kModel}, s);
  l.add({3 * kModel}, 0.02);
  l.add({kModel, kModel}, s);
  l.add({kModel}, 0.02);
  l.add({kModel}, 0.1);
  l.add({kModel}, 0.1);
  l.add({kMlp, kModel}, s);
  l.add({kMlp}, 0.02);
  l.add({kModel, kMlp}, 1.0 / std::sqrt(double(kMlp)));
  l.add({kModel}, 0.02);
  return l;
}

// 0 on and below the diagonal, -inf above: causal attention as an additive mask.
std::vector<float> causal_mask_values() {
  std::vector<float> m(static_cast<size_t>(kSeq * kSeq), 0.0f);
  for (int64_t i = 0; i < kSeq; ++i) {
    for (int64_t j = i + 1; j < kSeq; ++j) {
      m[static_cast<size_t>(i * kSeq + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  return m;
}

// The block, written once over a tensor library's functions (T = Tensor or torch::Tensor).
template <typename T, typename Ops>
T block_loss(const std::vector<T>& l, const T& mask, const Ops& ops) {
  const T& x = l[0];
  const T h1 = ops.layer_norm(x, l[1], l[2]);
  const T qkv = ops.linear(h1, l[3], l[4]);
  auto heads = [&](int64_t part) {
    return qkv.narrow(-1, part * kModel, kModel)
        .reshape({kBatch, kSeq, kHeads, kHeadDim})
        .transpose(1, 2);
  };
  const T q = heads(0), k = heads(1), v = heads(2);
  const T scores = ops.matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(kHeadDim))) + mask;
  const T attn = ops.matmul(ops.softmax(scores), v).transpose(1, 2).reshape({kBatch, kSeq, kModel});
  const T h = x + ops.linear(attn, l[5], l[6]);
  const T m =
      ops.linear(ops.gelu(ops.linear(ops.layer_norm(h, l[7], l[8]), l[9], l[10])), l[11], l[12]);
  const T y = h + m;
  return (y * y).mean();
}

struct TesseraOps {
  Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b) const {
    return ::tessera::layer_norm(x, {kModel}, w, b);
  }
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) const {
    return ::tessera::linear(x, w, b);
  }
  Tensor matmul(const Tensor& a, const Tensor& b) const { return ::tessera::matmul(a, b); }
  Tensor softmax(const Tensor& a) const { return ::tessera::softmax(a, -1); }
  Tensor gelu(const Tensor& a) const { return ::tessera::gelu(a); }
};

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

// The block step's products: each linear forward and its two gradients (every leaf takes one,
// x too), attention's q k^T and p v forward and their two gradients each.
constexpr double kBlockStepFlops = 3 * (product_flops(kBatch * kSeq, kModel, 3 * kModel) +
                                        product_flops(kBatch * kSeq, kModel, kModel) +
                                        2 * product_flops(kBatch * kSeq, kModel, kMlp)) +
                                   3 * kBatch * kHeads * 2 * product_flops(kSeq, kHeadDim, kSeq);

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
