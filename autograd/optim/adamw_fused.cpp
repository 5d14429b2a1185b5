#include "tessera/autograd/optim/adamw_fused.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/parallel.h"

namespace tessera::optim::detail {

namespace {

// The local tensors of the update, in the order given, where the pass can read them: plain
// tensors as they are; where param is distributed, the local shards, the gradient's laid out as
// the parameter's gradient (the dtensor layer's hook: a gradient of another layout is
// redistributed) and the moments' only when they have the parameter's layout (as zeros_like made
// them). Empty where they cannot be read so (a mix of plain and distributed tensors, moments of
// another layout).
std::vector<Tensor> local_tensors(const std::vector<Tensor>& ts) {
  const Tensor& param = ts.front();
  if (!any_distributed(ts)) return ts;
  for (const Tensor& t : ts) {
    if (!t.is_distributed()) return {};
  }
  const DistributedHooks& hooks = distributed_hooks();
  std::vector<Tensor> local{hooks.local(param), hooks.grad_local(ts[1], param, "adamw")};
  for (size_t i = 2; i < ts.size(); ++i) {
    if (!hooks.same_layout(ts[i], param)) return {};
    local.push_back(hooks.local(ts[i]));
  }
  return local;
}

template <typename T>
void update(T* p, const T* g, T* m, T* v, T* v_max, int64_t n, const AdamWOptions& o,
            double bias_correction1, double bias_correction2_sqrt) {
  // Each scalar rounded to T once, as the composite's tensor-scalar ops take them.
  const T decay = static_cast<T>(1.0 - o.lr * o.weight_decay);
  const T beta1 = static_cast<T>(o.beta1), one_minus_beta1 = static_cast<T>(1.0 - o.beta1);
  const T beta2 = static_cast<T>(o.beta2), one_minus_beta2 = static_cast<T>(1.0 - o.beta2);
  const T correction2 = static_cast<T>(bias_correction2_sqrt);
  const T eps = static_cast<T>(o.eps);
  const T step_size = static_cast<T>(o.lr / bias_correction1);
  const bool decays = o.weight_decay != 0.0, maximize = o.maximize;
  parallel_for(0, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T grad = maximize ? -g[i] : g[i];
      T param = p[i];
      if (decays) param *= decay;
      T exp_avg = m[i] * beta1;
      exp_avg += grad * one_minus_beta1;
      T exp_avg_sq = v[i] * beta2;
      exp_avg_sq += grad * grad * one_minus_beta2;
      T second_moment = exp_avg_sq;
      if (v_max != nullptr) {
        v_max[i] = std::max(v_max[i], exp_avg_sq);
        second_moment = v_max[i];
      }
      T denom = std::sqrt(second_moment);
      denom /= correction2;
      denom += eps;
      T step = exp_avg / denom;
      step *= step_size;
      p[i] = param - step;
      m[i] = exp_avg;
      v[i] = exp_avg_sq;
    }
  });
}

}  // namespace

bool adamw_update_fused(const Tensor& param, const Tensor& grad, AdamWState& state,
                        const AdamWOptions& options, double bias_correction1,
                        double bias_correction2_sqrt) {
  std::vector<Tensor> all{param, grad, state.exp_avg, state.exp_avg_sq};
  if (options.amsgrad) all.push_back(state.max_exp_avg_sq);
  const std::vector<Tensor> local = local_tensors(all);
  if (local.empty()) return false;
  const DType dtype = local.front().dtype();
  for (const Tensor& t : local) {
    if (t.device().type() != DeviceType::CPU || !t.is_contiguous() || t.dtype() != dtype ||
        t.numel() != local.front().numel()) {
      return false;
    }
  }
  const int64_t n = local.front().numel();
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    update<T>(local[0].data_ptr<T>(), local[1].data_ptr<T>(), local[2].data_ptr<T>(),
              local[3].data_ptr<T>(), options.amsgrad ? local[4].data_ptr<T>() : nullptr, n,
              options, bias_correction1, bias_correction2_sqrt);
  };
  if (dtype == kFloat32) {
    run(float{});
  } else if (dtype == kFloat64) {
    run(double{});
  } else {
    return false;
  }
  // Written in place, as the composite's in-place ops write: saved tensors see the change.
  for (const Tensor& t : local) {
    if (&t != &local[1]) t.storage()->bump_version();
  }
  return true;
}

}  // namespace tessera::optim::detail
