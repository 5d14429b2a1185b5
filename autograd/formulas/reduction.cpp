// Backward formulas of the reductions (runtime/ops/reduction.cpp), with PyTorch's semantics and
// grad_fn names. Every formula first brings the output's gradient back to a shape that broadcasts
// against the input (Reduced::kept), so that the rest is elementwise ops that record again under
// create_graph. See Note [Recording ops for autograd] in runtime/autograd_hooks.h.

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "tessera/autograd/formulas/formula.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/reduction_grad.h"

namespace tessera::autograd {

namespace {

template <typename F>
auto without_grad(F&& forward) {
  NoGradGuard no_grad;
  return forward();
}

// The geometry of one reduction: the input's sizes, the reduced dims (wrapped and sorted; every
// dim when none were given) and keepdim. The forward already validated the dims.
struct Reduced {
  Reduced(const char* op, const Tensor& a, const std::vector<int64_t>& given, bool keep)
      : sizes(a.sizes()), keepdim(keep) {
    const int64_t nd = a.dim();
    if (nd == 0) return;  // dim 0 / -1 of a 0-dim tensor names the tensor itself
    if (given.empty()) {
      for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
      return;
    }
    for (int64_t d : given) dims.push_back(wrap_dim(d, nd, op));
    std::sort(dims.begin(), dims.end());
  }

  // An output-shaped t with the reduced dims back as size-1 dims, so that it broadcasts against
  // the input.
  Tensor kept(const Tensor& t) const {
    if (keepdim) return t;
    Tensor r = t;
    for (int64_t d : dims) r = r.unsqueeze(d);
    return r;
  }
  // How many input elements each output element reduces.
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= sizes[static_cast<size_t>(d)];
    return n;
  }

  Shape sizes;
  std::vector<int64_t> dims;
  bool keepdim;
};

// 1, -1 or 0 per element: a constant, so it does not record.
Tensor sign(const Tensor& x) { return (x > 0.0).to(x.dtype()) - (x < 0.0).to(x.dtype()); }

class SumBackward final : public FormulaNode {
 public:
  SumBackward(const char* name, Reduced reduced)
      : FormulaNode(name), reduced_(std::move(reduced)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {reduced_.kept(grads[0]).expand(reduced_.sizes)};
  }

 private:
  Reduced reduced_;
};

class MeanBackward final : public FormulaNode {
 public:
  MeanBackward(const char* name, Reduced reduced)
      : FormulaNode(name), reduced_(std::move(reduced)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    // Scaled before the expand: one division per output element, not per input element.
    const Tensor scaled = grads[0] / static_cast<double>(reduced_.count());
    return {reduced_.kept(scaled).expand(reduced_.sizes)};
  }

 private:
  Reduced reduced_;
};

// PyTorch's prod_backward: result / x where no element is 0. Otherwise the derivative at x_i is
// the product of the other elements of its reduced slice, written as (product of the slice's
// non-zero elements) / x_i (for x_i != 0) times the product of the slice's other zeros, kept as
// tensors of x so that the second derivatives are right too: one other zero is the slice's sum
// of zeros (0, with derivative 1), and with two or more the value and its first derivatives are 0.
class ProdBackward final : public FormulaNode {
 public:
  ProdBackward(const char* name, Reduced reduced)
      : FormulaNode(name), reduced_(std::move(reduced)) {}
  SavedTensor self;
  SavedTensor result;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor x = self.unpack(*this);
    const Tensor g = reduced_.kept(grads[0]);
    const Tensor is_zero = x == 0.0;
    if (sum(is_zero).item<int64_t>() == 0) return {g * (reduced_.kept(result.unpack(*this)) / x)};
    const std::vector<int64_t>& dims = reduced_.dims;
    const Tensor zero = scalar_tensor(0.0, x.dtype());
    const Tensor one = scalar_tensor(1.0, x.dtype());
    const Tensor nonzero = where(is_zero, one, x);
    const Tensor zeros_in_slice = sum(is_zero, dims, /*keepdim=*/true);
    const Tensor zero_sum = sum(where(is_zero, x, zero), dims, /*keepdim=*/true);
    const Tensor other_zeros_at_nonzero =
        where(zeros_in_slice == 0.0, one, where(zeros_in_slice == 1.0, zero_sum, zero));
    const Tensor other_zeros_at_zero =
        where(zeros_in_slice == 1.0, one, where(zeros_in_slice == 2.0, zero_sum - x, zero));
    const Tensor nonzero_prod = prod(nonzero, dims, /*keepdim=*/true);
    return {g * (nonzero_prod / nonzero) *
            where(is_zero, other_zeros_at_zero, other_zeros_at_nonzero)};
  }
  void release_variables() override {
    self.release();
    result.release();
  }

 private:
  Reduced reduced_;
};

// amax / amin / max() / min(): the gradient split evenly among the elements equal to the result.
// For max() / min() (PyTorch's evenly_distribute_backward) a NaN result counts as equal to the NaN
// elements; amax / amin leave it NaN, as PyTorch.
class ExtremeBackward final : public FormulaNode {
 public:
  ExtremeBackward(const char* name, Reduced reduced, bool nan_is_extreme)
      : FormulaNode(name), reduced_(std::move(reduced)), nan_is_extreme_(nan_is_extreme) {}
  SavedTensor self;
  SavedTensor result;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor x = self.unpack(*this);
    const Tensor r = result.unpack(*this);
    // r is 0-dim when nan_is_extreme_: one host read.
    const Tensor is_extreme =
        nan_is_extreme_ && std::isnan(r.item<double>()) ? x != x : x == reduced_.kept(r);
    const Tensor ties = sum(is_extreme, reduced_.dims, /*keepdim=*/true);
    return {reduced_.kept(grads[0]) / ties * is_extreme};
  }
  void release_variables() override {
    self.release();
    result.release();
  }

 private:
  Reduced reduced_;
  bool nan_is_extreme_;
};

// max(dim) / min(dim): the value's gradient goes to the element at the returned index.
class IndexedExtremeBackward final : public FormulaNode {
 public:
  IndexedExtremeBackward(const char* name, Reduced reduced)
      : FormulaNode(name), reduced_(std::move(reduced)) {}
  SavedTensor indices;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    if (reduced_.dims.empty()) return {grads[0]};  // 0-dim input: the value is the input
    const int64_t dim = reduced_.dims[0];
    const Tensor idx = reduced_.kept(indices.unpack(*this));
    Shape line(reduced_.sizes.size(), 1);
    line[static_cast<size_t>(dim)] = reduced_.sizes[static_cast<size_t>(dim)];
    const Tensor positions = arange(Scalar(line[static_cast<size_t>(dim)]),
                                    TensorOptions().dtype(kInt64).device(idx.device()))
                                 .view(line);
    return {reduced_.kept(grads[0]) * (positions == idx)};
  }
  void release_variables() override { indices.release(); }

 private:
  Reduced reduced_;
};

class VarBackward final : public FormulaNode {
 public:
  VarBackward(Reduced reduced, double correction)
      : FormulaNode("VarBackward0"), reduced_(std::move(reduced)), correction_(correction) {}
  SavedTensor self;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor x = self.unpack(*this);
    const double scale = 2.0 / (static_cast<double>(reduced_.count()) - correction_);
    return {reduced_.kept(grads[0]) * scale * (x - mean(x, reduced_.dims, /*keepdim=*/true))};
  }
  void release_variables() override { self.release(); }

 private:
  Reduced reduced_;
  double correction_;
};

// PyTorch's norm_backward (torch.norm is linalg.vector_norm there, hence the name). Where the norm
// is 0 the p >= 1 formulas would divide by 0: the gradient there is 0 (a subgradient), as PyTorch's
// masked_fill.
class NormBackward final : public FormulaNode {
 public:
  NormBackward(Reduced reduced, double p)
      : FormulaNode("LinalgVectorNormBackward0"), reduced_(std::move(reduced)), p_(p) {}
  SavedTensor self;
  SavedTensor result;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor x = self.unpack(*this);
    const Tensor g = reduced_.kept(grads[0]);
    if (p_ == 0.0) return {zeros_like(x)};
    if (p_ == 1.0) return {sign(x) * g};
    const Tensor norm_kept = reduced_.kept(result.unpack(*this));
    if (std::isinf(p_)) {
      const Tensor is_extreme = abs(x) == norm_kept;
      const Tensor ties = sum(is_extreme, reduced_.dims, /*keepdim=*/true);
      return {sign(x) * (g / ties * is_extreme)};
    }
    const Tensor zero = scalar_tensor(0.0, x.dtype());
    if (p_ == 2.0) return {x * where(norm_kept == 0.0, zero, g / norm_kept)};
    if (p_ < 1.0) {
      const Tensor scaled = where(x == 0.0, zero, pow(abs(x), p_ - 1.0));
      return {sign(x) * scaled * (g * pow(norm_kept, 1.0 - p_))};
    }
    const Tensor scale = where(norm_kept == 0.0, zero, g / pow(norm_kept, p_ - 1.0));
    if (p_ < 2.0) return {sign(x) * pow(abs(x), p_ - 1.0) * scale};
    return {x * pow(abs(x), p_ - 2.0) * scale};
  }
  void release_variables() override {
    self.release();
    result.release();
  }

 private:
  Reduced reduced_;
  double p_;
};

// The slots: the forward without recording, then the node. Names follow PyTorch: overload 0 is
// the reduction over all elements, overload 1 the one over dims; max() / min() are overload 1
// and max(dim) / min(dim) overload 0.

Tensor sum_recorded(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim,
                    std::optional<DType> dtype) {
  Tensor out = without_grad([&] { return sum(a, dims, keepdim, dtype); });
  // keepdim implies the overload with dims, even an empty list.
  const char* name = dims.empty() && !keepdim ? "SumBackward0" : "SumBackward1";
  record(std::make_shared<SumBackward>(name, Reduced("sum", a, dims, keepdim)), {a}, {&out});
  return out;
}

Tensor mean_recorded(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = without_grad([&] { return mean(a, dims, keepdim); });
  const char* name = dims.empty() && !keepdim ? "MeanBackward0" : "MeanBackward1";
  record(std::make_shared<MeanBackward>(name, Reduced("mean", a, dims, keepdim)), {a}, {&out});
  return out;
}

Tensor prod_recorded(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = without_grad([&] { return prod(a, dims, keepdim); });
  const char* name = dims.empty() && !keepdim ? "ProdBackward0" : "ProdBackward1";
  auto node = std::make_shared<ProdBackward>(name, Reduced("prod", a, dims, keepdim));
  record(node, {a}, {&out});
  node->self = SavedTensor(a, /*is_output=*/false);
  node->result = SavedTensor(out, /*is_output=*/true);
  return out;
}

Tensor record_extreme(const char* name, Tensor out, const Tensor& a, Reduced reduced,
                      bool nan_is_extreme) {
  auto node = std::make_shared<ExtremeBackward>(name, std::move(reduced), nan_is_extreme);
  record(node, {a}, {&out});
  node->self = SavedTensor(a, /*is_output=*/false);
  node->result = SavedTensor(out, /*is_output=*/true);
  return out;
}

Tensor amax_recorded(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = without_grad([&] { return amax(a, dims, keepdim); });
  return record_extreme("AmaxBackward0", out, a, Reduced("amax", a, dims, keepdim), false);
}

Tensor amin_recorded(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = without_grad([&] { return amin(a, dims, keepdim); });
  return record_extreme("AminBackward0", out, a, Reduced("amin", a, dims, keepdim), false);
}

Tensor max_all_recorded(const Tensor& a) {
  Tensor out = without_grad([&] { return max(a); });
  return record_extreme("MaxBackward1", out, a, Reduced("max", a, {}, false), true);
}

Tensor min_all_recorded(const Tensor& a) {
  Tensor out = without_grad([&] { return min(a); });
  return record_extreme("MinBackward1", out, a, Reduced("min", a, {}, false), true);
}

std::pair<Tensor, Tensor> record_indexed_extreme(const char* name, std::pair<Tensor, Tensor> out,
                                                 const Tensor& a, Reduced reduced) {
  auto node = std::make_shared<IndexedExtremeBackward>(name, std::move(reduced));
  record(node, {a}, {&out.first});  // the int64 indices are not differentiable
  node->indices = SavedTensor(out.second, /*is_output=*/false);
  return out;
}

std::pair<Tensor, Tensor> max_dim_recorded(const Tensor& a, int64_t dim, bool keepdim) {
  auto out = without_grad([&] { return max(a, dim, keepdim); });
  return record_indexed_extreme("MaxBackward0", out, a, Reduced("max", a, {dim}, keepdim));
}

std::pair<Tensor, Tensor> min_dim_recorded(const Tensor& a, int64_t dim, bool keepdim) {
  auto out = without_grad([&] { return min(a, dim, keepdim); });
  return record_indexed_extreme("MinBackward0", out, a, Reduced("min", a, {dim}, keepdim));
}

Tensor var_recorded(const Tensor& a, const std::vector<int64_t>& dims, double correction,
                    bool keepdim) {
  Tensor out = without_grad([&] { return var(a, dims, correction, keepdim); });
  auto node = std::make_shared<VarBackward>(Reduced("var", a, dims, keepdim), correction);
  record(node, {a}, {&out});
  node->self = SavedTensor(a, /*is_output=*/false);
  return out;
}

Tensor norm_recorded(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor out = without_grad([&] { return norm(a, p, dims, keepdim); });
  auto node = std::make_shared<NormBackward>(Reduced("norm", a, dims, keepdim), p);
  record(node, {a}, {&out});
  node->self = SavedTensor(a, /*is_output=*/false);
  node->result = SavedTensor(out, /*is_output=*/true);
  return out;
}

}  // namespace

}  // namespace tessera::autograd

namespace tessera {

void install_grad_hooks(ReductionGradHooks& hooks) {
  hooks.sum = &autograd::sum_recorded;
  hooks.prod = &autograd::prod_recorded;
  hooks.mean = &autograd::mean_recorded;
  hooks.amax = &autograd::amax_recorded;
  hooks.amin = &autograd::amin_recorded;
  hooks.max_all = &autograd::max_all_recorded;
  hooks.min_all = &autograd::min_all_recorded;
  hooks.max_dim = &autograd::max_dim_recorded;
  hooks.min_dim = &autograd::min_dim_recorded;
  hooks.var = &autograd::var_recorded;
  hooks.norm = &autograd::norm_recorded;
}

}  // namespace tessera
