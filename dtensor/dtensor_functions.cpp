#include "dtensor/dtensor_functions.h"

#include "autograd/function.h"
#include "dtensor/redistribute/plan.h"

namespace tessera::dtensor {

namespace {

using autograd::AutogradContext;
using SpecPtr = std::shared_ptr<const DTensorSpec>;

SpecPtr with(const DTensorSpec& spec, const Placements& placements, DType dtype) {
  auto s = std::make_shared<DTensorSpec>(spec);
  s->placements = placements;
  s->dtype = dtype;
  return s;
}

struct RedistributeFn : autograd::Function<RedistributeFn> {
  static const char* name() { return "RedistributeBackward"; }
  static Tensor forward(AutogradContext* ctx, const Tensor& local, SpecPtr src, Placements dst,
                        RedistributeOptions options, ExecuteResult* pending) {
    Tensor in = local;
    SpecPtr spec = src;
    if (options.forward_dtype.has_value() && *options.forward_dtype != local.dtype()) {
      in = local.to(*options.forward_dtype);
      spec = with(*src, src->placements, in.dtype());
    }
    ctx->saved_data["src"] = src;
    ctx->saved_data["dst"] = dst;
    ctx->saved_data["backward_dtype"] = options.backward_dtype;
    if (src->placements == dst) return in.view(in.sizes());
    const RedistributePlan& plan = plan_redistribute(*spec, dst);
    ExecuteResult r = execute_plan(in, *spec, plan, options.async_op && pending != nullptr);
    Tensor out = r.local;
    if (pending != nullptr) *pending = std::move(r);
    return out;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    const auto src = std::any_cast<SpecPtr>(ctx->saved_data["src"]);
    const auto dst = std::any_cast<Placements>(ctx->saved_data["dst"]);
    const auto backward_dtype =
        std::any_cast<std::optional<DType>>(ctx->saved_data["backward_dtype"]);
    Tensor g = grads[0];
    if (backward_dtype.has_value() && *backward_dtype != g.dtype()) g = g.to(*backward_dtype);
    const SpecPtr grad_spec = with(*src, normalize_for_grad(dst), g.dtype());
    return {RedistributeFn::apply(g, grad_spec, normalize_for_grad(src->placements),
                                  RedistributeOptions{}, static_cast<ExecuteResult*>(nullptr))};
  }
};

// from_local's and to_local's recorded identity. The gradient arrives in, and leaves in, the
// spec's placements with Partial -> Replicate, except that a grad_placements hint is where
// from_local's gradient goes to (kHintIsTarget) and where to_local's comes from.
template <bool kHintIsTarget>
struct LocalIdentityFn : autograd::Function<LocalIdentityFn<kHintIsTarget>> {
  static const char* name() { return kHintIsTarget ? "FromLocalBackward" : "ToLocalBackward"; }
  static Tensor forward(AutogradContext* ctx, const Tensor& local, SpecPtr spec,
                        std::optional<Placements> grad_placements) {
    ctx->saved_data["spec"] = spec;
    ctx->saved_data["grad_placements"] = grad_placements;
    return local.view(local.sizes());
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    const auto spec = std::any_cast<SpecPtr>(ctx->saved_data["spec"]);
    const auto hint = std::any_cast<std::optional<Placements>>(ctx->saved_data["grad_placements"]);
    const Placements normalized = normalize_for_grad(spec->placements);
    if (!hint.has_value() || *hint == normalized) return {grads[0]};
    const Placements& from = kHintIsTarget ? normalized : *hint;
    const Placements& to = kHintIsTarget ? *hint : normalized;
    return {RedistributeFn::apply(grads[0], with(*spec, from, grads[0].dtype()), to,
                                  RedistributeOptions{}, static_cast<ExecuteResult*>(nullptr))};
  }
};

using FromLocalFn = LocalIdentityFn<true>;
using ToLocalFn = LocalIdentityFn<false>;

// The identity on an input that is Replicate along mesh dims where the op's output is not: each
// rank used it for its own part of the result, so its gradient is the sum over those dims.
struct SumGradOverFn : autograd::Function<SumGradOverFn> {
  static const char* name() { return "SumGradOverBackward"; }
  static Tensor forward(AutogradContext* ctx, const Tensor& local, SpecPtr spec,
                        std::vector<int64_t> mesh_dims) {
    ctx->saved_data["spec"] = spec;
    ctx->saved_data["mesh_dims"] = std::move(mesh_dims);
    return local.view(local.sizes());
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    const auto spec = std::any_cast<SpecPtr>(ctx->saved_data["spec"]);
    const auto mesh_dims = std::any_cast<std::vector<int64_t>>(ctx->saved_data["mesh_dims"]);
    const Placements to = normalize_for_grad(spec->placements);
    Placements from = to;
    for (int64_t m : mesh_dims) from[static_cast<size_t>(m)] = Partial();
    return {RedistributeFn::apply(grads[0], with(*spec, from, grads[0].dtype()), to,
                                  RedistributeOptions{}, static_cast<ExecuteResult*>(nullptr))};
  }
};

}  // namespace

Tensor redistribute_local(const Tensor& local, const std::shared_ptr<const DTensorSpec>& src,
                          const Placements& dst, const RedistributeOptions& options,
                          ExecuteResult* pending) {
  return RedistributeFn::apply(local, src, dst, options, pending);
}

Tensor from_local_identity(const Tensor& local, const std::shared_ptr<const DTensorSpec>& spec,
                           const std::optional<Placements>& grad_placements) {
  return FromLocalFn::apply(local, spec, grad_placements);
}

Tensor to_local_identity(const Tensor& local, const std::shared_ptr<const DTensorSpec>& spec,
                         const std::optional<Placements>& grad_placements) {
  return ToLocalFn::apply(local, spec, grad_placements);
}

Tensor sum_grad_over(const Tensor& local, const std::shared_ptr<const DTensorSpec>& spec,
                     const std::vector<int64_t>& mesh_dims) {
  return SumGradOverFn::apply(local, spec, mesh_dims);
}

}  // namespace tessera::dtensor
