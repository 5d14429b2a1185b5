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
//
// Note [Optimizer state in checkpoints]
// A checkpoint (checkpoint/state_dict.h) reads and writes an optimizer's state through references
// to its fields: per parameter, named tensors (AdamW's exp_avg, ...) and integers (the step
// count); per group, the named options (lr, betas, ...; booleans as 0 / 1). Before the first
// step the state is empty, so the references materialize it as the state that step would create
// (zeros with the parameter's layout, step 0): the first update then reads the materialized
// state exactly as it would have created it, and a load has tensors to fill in place. The
// updates modify state tensors in place, never replace them, so references handed out stay the
// state.

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tessera/autograd/nn/parameter_utils.h"
#include "tessera/runtime/error.h"
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

  // ---- checkpoint access: Note [Optimizer state in checkpoints] ----
  struct StateRefs {
    std::vector<std::pair<std::string, Tensor*>> tensors;
    std::vector<std::pair<std::string, int64_t*>> integers;
  };
  struct OptionRef {
    std::string name;
    double* number = nullptr;  // one of the two is set
    bool* flag = nullptr;
  };
  // The state of `param` (materialized when it has none yet). Error: `param` is not one of the
  // optimizer's parameters. An optimizer written outside GroupedOptimizer that does not override
  // these three raises from them (a checkpoint must not silently drop its state).
  virtual StateRefs state_refs(const Tensor& param);
  virtual size_t num_param_groups() const;
  virtual std::vector<OptionRef> option_refs(size_t group);

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

// Options must provide `void validate(const char* op) const` (raising on invalid values) and
// `for_each_field(f)`, calling f(name, double&) or f(name, bool&) for each option; State must
// provide `materialize(param, options)` and `for_each_field(f)`, calling f(name, Tensor&) or
// f(name, int64_t&) (Note [Optimizer state in checkpoints]). Update is the per-parameter update:
// void(Tensor param, const Tensor& grad, State&, const Options&); see Note [Optimizer updates on
// shards].
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

  StateRefs state_refs(const Tensor& param) override {
    const Options* options = nullptr;
    for (const ParamGroup<Options>& group : groups_) {
      for (const Tensor& p : group.params) {
        if (p.unsafe_impl() == param.unsafe_impl()) options = &group.options;
      }
    }
    TS_CHECK(options != nullptr, "[", name_, ".state_refs] the tensor is not a parameter of this ",
             name_);
    State& state = state_[param.unsafe_impl()];
    {
      NoGradGuard no_grad;
      state.materialize(param, *options);
    }
    StateRefs refs;
    state.for_each_field([&refs](const char* field, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, Tensor>) {
        if (value.defined()) refs.tensors.emplace_back(field, &value);
      } else {
        refs.integers.emplace_back(field, &value);
      }
    });
    return refs;
  }

  size_t num_param_groups() const override { return groups_.size(); }

  std::vector<OptionRef> option_refs(size_t group) override {
    TS_CHECK(group < groups_.size(), "[", name_, ".option_refs] group ", group, " of ",
             groups_.size());
    std::vector<OptionRef> refs;
    groups_[group].options.for_each_field([&refs](const char* field, auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
        refs.push_back(OptionRef{field, nullptr, &value});
      } else {
        refs.push_back(OptionRef{field, &value, nullptr});
      }
    });
    return refs;
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
