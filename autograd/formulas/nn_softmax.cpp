// softmax and log_softmax along one dim.

#include <memory>
#include <vector>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/autograd/formulas/nn_formulas.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/nn_internal.h"

namespace tessera::autograd {

namespace {

// The dims the row sums of a backward run over: `dim`, or all of a 0-dim tensor's (a row of one).
std::vector<int64_t> row_dims(int64_t dim, int64_t ndim) {
  if (ndim == 0) return {};
  return {wrap_dim(dim, ndim, "softmax")};
}

class SoftmaxBackward final : public FormulaNode {
 public:
  SoftmaxBackward(int64_t dim, std::vector<int64_t> dims)
      : FormulaNode("SoftmaxBackward0"), dim_(dim), dims_(std::move(dims)) {}
  SavedTensor result;

  // y * (g - sum(g * y)), written as gy - y * sum(gy) to multiply once less.
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor y = result.unpack(*this);
    if (nn_fused_applies(grads[0], y)) {
      return {detail::softmax_backward(std::move(grads[0]), y, dim_, false)};
    }
    const Tensor gy = grads[0] * y;
    return {gy - y * sum(gy, dims_, /*keepdim=*/true)};
  }
  void release_variables() override { result.release(); }

 private:
  int64_t dim_;
  std::vector<int64_t> dims_;
};

class LogSoftmaxBackward final : public FormulaNode {
 public:
  LogSoftmaxBackward(int64_t dim, std::vector<int64_t> dims)
      : FormulaNode("LogSoftmaxBackward0"), dim_(dim), dims_(std::move(dims)) {}
  SavedTensor result;

  // g - softmax * sum(g), with softmax = exp(log_softmax).
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor y = result.unpack(*this);
    if (nn_fused_applies(grads[0], y)) {
      return {detail::softmax_backward(std::move(grads[0]), y, dim_, true)};
    }
    return {grads[0] - exp(y) * sum(grads[0], dims_, /*keepdim=*/true)};
  }
  void release_variables() override { result.release(); }

 private:
  int64_t dim_;
  std::vector<int64_t> dims_;
};

template <typename Node, Tensor (*op)(const Tensor&, int64_t)>
Tensor record_softmax(const Tensor& a, int64_t dim) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = op(a, dim);  // validates dim first
  }
  auto node = std::make_shared<Node>(dim, row_dims(dim, a.dim()));
  record(node, {a}, {&out});
  node->result = SavedTensor(out, /*is_output=*/true);
  return out;
}

}  // namespace

void install_softmax_grads(NnGradHooks& hooks) {
  hooks.softmax = record_softmax<SoftmaxBackward, softmax>;
  hooks.log_softmax = record_softmax<LogSoftmaxBackward, log_softmax>;
}

}  // namespace tessera::autograd
