#pragma once
// Optimizers (torch.optim): Optimizer, the interface a training loop uses (step, zero_grad), and
// GroupedOptimizer, which holds parameter groups with per-group options and per-parameter state.
//
// Note [Optimizer updates on shards]
// Each optimizer's arithmetic is a free function of (parameter, gradient, state, options), e.g.
// sgd_update / adamw_update, that reads and writes only those tensors, elementwise, in place on
// the parameter's storage, and creates its state with zeros_like(parameter). Nothing in it looks
// at a global shape or at other parameters. So a distributed parameter (a DTensor whose gradient
// has the same placements) is updated by calling the same function on its local shard with the
// local shard of its gradient and state: elementwise updates commute with sharding, and the state
// lives where the shard lives. Optimizers that need a global quantity (a norm for clipping, LAMB's
// trust ratio) must reduce it across the mesh first; SGD and AdamW need none.

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tessera/autograd/nn/parameter_utils.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/tensor.h"

namespace tessera::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (parameters without one are skipped), in
  // place, under NoGradGuard.
  virtual void step() = 0;
  // Clears the gradients of all parameters: undefined (set_to_none) or zero-filled.
  void zero_grad(bool set_to_none = true) { nn::zero_grad(parameters(), set_to_none); }
  // Every parameter of every group, in order.
  virtual std::vector<Tensor> parameters() const = 0;

 protected:
  Optimizer() = default;
};

template <typename Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

namespace detail {
// Errors of a parameter handed to optimizer `op`: undefined, not a leaf, not floating point, or
// already in `seen` (a parameter may appear once across all groups).
void check_param(const Tensor& param, const char* op, std::unordered_set<const TensorImpl*>& seen);
}  // namespace detail

// Options must provide `void validate(const char* op) const` (raising on invalid values).
// Update is the per-parameter update: void(Tensor param, const Tensor& grad, State&, const
// Options&); see Note [Optimizer updates on shards].
template <typename Options, typename State, auto Update>
class GroupedOptimizer : public Optimizer {
 public:
  // The groups, whose options may be changed between steps (learning-rate schedules). Add
  // parameters with add_param_group, which checks them.
  std::vector<ParamGroup<Options>>& param_groups() { return groups_; }
  const std::vector<ParamGroup<Options>>& param_groups() const { return groups_; }

  // Errors: invalid options; a parameter that is undefined, not a leaf, not floating point or
  // already in a group.
  void add_param_group(ParamGroup<Options> group) {
    group.options.validate(name_);
    // Checked against a copy, so that a rejected group leaves the optimizer unchanged.
    std::unordered_set<const TensorImpl*> seen = seen_;
    for (const Tensor& param : group.params) detail::check_param(param, name_, seen);
    groups_.push_back(std::move(group));
    seen_ = std::move(seen);
  }

  void step() override {
    NoGradGuard no_grad;
    for (const ParamGroup<Options>& group : groups_) {
      for (const Tensor& param : group.params) {
        const Tensor grad = param.grad();
        if (!grad.defined()) continue;
        Update(param, grad.detach(), state_[param.unsafe_impl()], group.options);
      }
    }
  }

  std::vector<Tensor> parameters() const override {
    std::vector<Tensor> out;
    for (const ParamGroup<Options>& group : groups_) {
      out.insert(out.end(), group.params.begin(), group.params.end());
    }
    return out;
  }

  // The state of `param` (a default-constructed State before its first update).
  const State& state(const Tensor& param) const {
    static const State kInitial{};
    auto it = state_.find(param.unsafe_impl());
    return it == state_.end() ? kInitial : it->second;
  }

 protected:
  GroupedOptimizer(const char* name, std::vector<ParamGroup<Options>> groups) : name_(name) {
    for (ParamGroup<Options>& group : groups) add_param_group(std::move(group));
  }

 private:
  const char* name_;
  std::vector<ParamGroup<Options>> groups_;
  // Keyed by the parameter's TensorImpl, which the groups keep alive (PyTorch keys by the
  // parameter object).
  std::unordered_map<const TensorImpl*, State> state_;
  std::unordered_set<const TensorImpl*> seen_;
};

}  // namespace tessera::optim
