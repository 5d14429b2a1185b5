#include "tessera/dtensor/dtensor_functions.h"

#include <memory>
#include <vector>

#include "tessera/autograd/function.h"
#include "tessera/dtensor/redistribute/plan.h"
#include "tessera/runtime/grad_mode.h"

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

// Note [Partial gradients into a redistribute]
// An input moved to Replicate by a redistribute (S(d) -> R: an all_gather) and then used beside
// a sharded output (SumGradOver: each rank used it for its own part of the result) has a Partial
// gradient. Reducing it there (all_reduce) and then taking the local chunk in the redistribute's
// backward moves twice the bytes of one reduce_scatter, PyTorch's path. So when every consumer of
// the redistribute's output is a SumGradOver over the same mesh dims (the node's consumer count,
// autograd::Node::consumers, equals the SumGradOvers registered with it), the SumGradOvers pass
// their gradients on unreduced, the engine sums them, and the redistribute's backward takes the
// sum as Partial on those dims: P -> S(d) is one reduce_scatter. Both decide with the same test at
// backward time. Not under create_graph (a recording backward could add consumers between the two
// decisions), nor when the redistributed tensor has gradient hooks (they see the reduced value).
struct PartialUses {
  std::vector<int64_t> mesh_dims;
  uint32_t count = 0;
  bool mismatch = false;  // SumGradOvers over different mesh dims
  bool backward_ran = false;
  std::weak_ptr<autograd::Node> node;  // the redistribute's
};

bool gradients_stay_partial(const PartialUses& uses) {
  const std::shared_ptr<autograd::Node> node = uses.node.lock();
  return node != nullptr && !uses.mismatch && uses.count > 0 && uses.count == node->consumers() &&
         !node->has_pre_hooks() && !is_grad_enabled();
}

using PartialUsesPtr = std::shared_ptr<PartialUses>;

PartialUsesPtr partial_uses_of(const autograd::AutogradContext& ctx) {
  const auto it = ctx.saved_data.find("partial_uses");
  return it == ctx.saved_data.end() ? nullptr : std::any_cast<PartialUsesPtr>(it->second);
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
    Placements from = normalize_for_grad(dst);
    if (const PartialUsesPtr uses = partial_uses_of(*ctx)) {
      if (gradients_stay_partial(*uses)) {
        for (int64_t m : uses->mesh_dims) from[static_cast<size_t>(m)] = Partial();
      }
      uses->backward_ran = true;
    }
    const SpecPtr grad_spec = with(*src, from, g.dtype());
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
    if (const PartialUsesPtr uses = partial_uses_of(*ctx);
        uses != nullptr && gradients_stay_partial(*uses)) {
      return {grads[0]};  // reduced by the redistribute's backward
    }
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
  Tensor out = RedistributeFn::apply(local, src, dst, options, pending);
  if (auto* node = dynamic_cast<autograd::CppNode<RedistributeFn>*>(out.grad_fn().get())) {
    auto uses = std::make_shared<PartialUses>();
    uses->node = out.grad_fn();
    node->ctx_.saved_data["partial_uses"] = std::move(uses);
  }
  return out;
}

bool awaits_backward(const Tensor& local) {
  const auto* node = dynamic_cast<autograd::CppNode<RedistributeFn>*>(local.grad_fn().get());
  if (node == nullptr) return false;
  const PartialUsesPtr uses = partial_uses_of(node->ctx_);
  return uses != nullptr && !uses->backward_ran;
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
  Tensor out = SumGradOverFn::apply(local, spec, mesh_dims);
  // Registered only when recorded (Note [Partial gradients into a redistribute]): a consumer
  // counted without its edge could hide another consumer's Replicate gradient.
  auto* redistribute = dynamic_cast<autograd::CppNode<RedistributeFn>*>(local.grad_fn().get());
  auto* self = dynamic_cast<autograd::CppNode<SumGradOverFn>*>(out.grad_fn().get());
  if (redistribute != nullptr && self != nullptr && local.output_nr() == 0) {
    if (const PartialUsesPtr uses = partial_uses_of(redistribute->ctx_)) {
      if (uses->count == 0) uses->mesh_dims = mesh_dims;
      uses->mismatch = uses->mismatch || uses->mesh_dims != mesh_dims;
      ++uses->count;
      self->ctx_.saved_data["partial_uses"] = uses;
    }
  }
  return out;
}

}  // namespace tessera::dtensor
