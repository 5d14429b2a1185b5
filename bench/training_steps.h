#pragma once
// The two training steps of issue 19, written once over a tensor library's functions, for every
// program that runs them: bench/vs_libtorch (Tessera beside libtorch) and
// bench/step_products_bench.cpp (where a Tessera step's time goes). The MLP step is
// cross_entropy(gelu(X W1) W2, y) at 256 x 512 x 1024 x 10; the block is one pre-norm transformer
// block (causal attention written out with matmul and softmax, GELU MLP), batch 8 x 64 tokens,
// hidden 256, 8 heads, MLP 1024, whose loss is mean(y^2).

#include <tessera/tessera.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessera::bench::steps {

// ---- the MLP step ----

constexpr int64_t kRows = 256, kIn = 512, kHidden = 1024, kClasses = 10;

// FLOPs of an m x k @ k x n product.
constexpr double product_flops(int64_t m, int64_t k, int64_t n) {
  return 2.0 * double(m) * double(k) * double(n);
}

// The MLP step's products: X W1 and H W2 forward; dY W2^T, H^T dY and X^T dH backward (X takes
// no gradient).
constexpr double kMlpStepFlops =
    2 * product_flops(kRows, kIn, kHidden) + 3 * product_flops(kRows, kHidden, kClasses);

// A leaf: its shape, the scale of its standard normal values, whether it takes a gradient.
struct LeafSpec {
  std::vector<int64_t> shape;
  double scale;
  bool requires_grad = true;
};

// The MLP's leaves: X (no gradient), W1, W2.
inline std::vector<LeafSpec> mlp_leaf_specs() {
  return {{{kRows, kIn}, 1.0, false},
          {{kIn, kHidden}, 1.0 / std::sqrt(double(kIn))},
          {{kHidden, kClasses}, 1.0 / std::sqrt(double(kHidden))}};
}

// ---- the transformer block ----

constexpr int64_t kBatch = 8, kSeq = 64, kModel = 256, kHeads = 8, kMlp = 1024;
constexpr int64_t kHeadDim = kModel / kHeads;

// The block step's products: each linear forward and its two gradients (every leaf takes one,
// x too), attention's q k^T and p v forward and their two gradients each.
constexpr double kBlockStepFlops = 3 * (product_flops(kBatch * kSeq, kModel, 3 * kModel) +
                                        product_flops(kBatch * kSeq, kModel, kModel) +
                                        2 * product_flops(kBatch * kSeq, kModel, kMlp)) +
                                   3 * kBatch * kHeads * 2 * product_flops(kSeq, kHeadDim, kSeq);

// The block's leaves, in order: x, ln1 weight, ln1 bias, Wqkv, bqkv, Wo, bo, ln2 weight, ln2
// bias, W1, b1, W2, b2 (weights [out, in]). All take gradients.
inline std::vector<LeafSpec> block_leaf_specs() {
  const double s = 1.0 / std::sqrt(double(kModel));
  return {{{kBatch, kSeq, kModel}, 1.0},
          {{kModel}, 0.1},
          {{kModel}, 0.1},
          {{3 * kModel, kModel}, s},
          {{3 * kModel}, 0.02},
          {{kModel, kModel}, s},
          {{kModel}, 0.02},
          {{kModel}, 0.1},
          {{kModel}, 0.1},
          {{kMlp, kModel}, s},
          {{kMlp}, 0.02},
          {{kModel, kMlp}, 1.0 / std::sqrt(double(kMlp))},
          {{kModel}, 0.02}};
}

// 0 on and below the diagonal, -inf above: causal attention as an additive mask (kSeq x kSeq).
inline std::vector<float> causal_mask_values() {
  std::vector<float> m(static_cast<size_t>(kSeq * kSeq), 0.0f);
  for (int64_t i = 0; i < kSeq; ++i) {
    for (int64_t j = i + 1; j < kSeq; ++j) {
      m[static_cast<size_t>(i * kSeq + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  return m;
}

// The block's loss over a library's functions (T = the tensor type; Ops provides layer_norm,
// linear, matmul, softmax and gelu), leaves in block_leaf_specs' order.
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

// block_loss's functions in Tessera.
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

// The MLP step's loss in Tessera (labels: kRows class indices).
inline Tensor mlp_loss(const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& labels) {
  return cross_entropy(matmul(gelu(matmul(x, w1)), w2), labels);
}

}  // namespace tessera::bench::steps
