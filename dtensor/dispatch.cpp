// DTensor dispatch: the hooks runtime/ calls for ops on distributed tensors (Note [Distributed
// dispatch] in runtime/distributed.h), choosing placements as Note [Choosing placements for an
// op] in dtensor/sharding_rule.h says.

#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "tessera/dtensor/cross_entropy.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/dtensor_functions.h"
#include "tessera/dtensor/dtensor_meta.h"
#include "tessera/dtensor/local_errors.h"
#include "tessera/dtensor/local_layout.h"
#include "tessera/dtensor/loss_parallel.h"
#include "tessera/dtensor/partial_factors.h"
#include "tessera/dtensor/redistribute/cost_model.h"
#include "tessera/dtensor/redistribute/plan.h"
#include "tessera/dtensor/rule_check.h"
#include "tessera/dtensor/rules/rule_table.h"
#include "tessera/dtensor/spmd_types/checker.h"
#include "tessera/dtensor/spmd_types/local_types.h"
#include "tessera/dtensor/strategy_search.h"
#include "tessera/dtensor/view_geometry.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera {

namespace dtensor {
namespace {

using SpecPtr = std::shared_ptr<const DTensorSpec>;

// ---- user rules (register_sharding) ----

struct UserRule {
  ShardingRuleFn rule;  // null: none registered
  bool validate = false;
};

struct UserRules {
  std::mutex mutex;
  std::map<std::string, UserRule, std::less<>> rules;
  // Bumped on every change; rank threads drop their cached choices when it moves.
  std::atomic<uint64_t> version{1};
};

UserRules& user_rules() {
  static UserRules rules;
  return rules;
}

thread_local int implicit_replication_depth = 0;

// ---- one call's inputs ----

struct Inputs {
  DeviceMesh mesh;
  std::vector<SpecPtr> specs;  // null for an absent input
  std::vector<Tensor> locals;  // undefined for an absent input
};

SpecPtr replicate_spec(const Tensor& t, const DeviceMesh& mesh) {
  return std::make_shared<DTensorSpec>(
      DTensorSpec{mesh, Placements(static_cast<size_t>(mesh.ndim()), Replicate()), t.sizes(),
                  contiguous_strides(t.sizes()), t.dtype()});
}

Inputs gather_inputs(const char* op, const std::vector<Tensor>& tensors) {
  size_t first = 0;
  while (!tensors[first].is_distributed()) ++first;  // the dispatcher runs only when one is
  Inputs in{meta_of(tensors[first]).spec->mesh, {}, {}};
  for (size_t i = first + 1; i < tensors.size(); ++i) {
    if (!tensors[i].is_distributed()) continue;
    const DeviceMesh& mesh = meta_of(tensors[i]).spec->mesh;
    TS_CHECK(mesh == in.mesh, "[", op, "] arguments ", first, " and ", i,
             " are DTensors on different device meshes (", in.mesh, " and ", mesh,
             "); an op needs all of its DTensor arguments on one mesh");
  }
  in.specs.resize(tensors.size());
  in.locals.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    if (t.is_distributed()) {
      in.locals[i] = ready_local(t);
      in.specs[i] = meta_of(t).spec;
      continue;
    }
    TS_CHECK(t.numel() == 1 || implicit_replication_depth > 0, "[", op, "] argument ", i,
             " is a plain Tensor of shape ", t.sizes(), " and argument ", first,
             " is a DTensor: mixing them is only allowed for one-element tensors, or for any "
             "plain tensor inside an ImplicitReplicationGuard (which treats it as Replicate); "
             "otherwise make it a DTensor with distribute_tensor or DTensor::from_local");
    in.locals[i] = t;
    in.specs[i] = replicate_spec(t, in.mesh);
  }
  return in;
}

// ---- the cache key ----

template <typename T>
void append(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void append(std::string& key, const Shape& shape) {
  append(key, shape.size());
  for (int64_t v : shape) append(key, v);
}

void append(std::string& key, const Placements& ps) {
  for (const Placement& p : ps) {
    append(key, p.kind());
    if (p.is_shard()) {
      append(key, p.dim());
      append(key, p.split_factor());
    }
    if (p.is_partial()) append(key, p.reduce_op());
  }
}

std::string cache_key(const char* op, const OpAttrs& attrs, const Inputs& in, bool recording) {
  std::string key(op);
  key.push_back(recording ? '\1' : '\0');
  append(key, Shape(attrs.ints));
  append(key, attrs.reals.size());
  for (double r : attrs.reals) append(key, r);
  append(key, attrs.flag);
  append(key, in.mesh.id());
  for (const SpecPtr& s : in.specs) {
    append(key, s != nullptr);
    if (s == nullptr) continue;
    append(key, s->placements);
    append(key, s->shape);
    append(key, s->stride);
    append(key, s->dtype);
  }
  return key;
}

// ---- choosing placements ----

struct Choice {
  std::vector<Placements> inputs;  // the placements each present input runs with
  // Per input: the mesh dims along which it is Replicate while an output is not, so that each
  // rank used it for a different part of the result and its gradient sums over them.
  std::vector<std::vector<int64_t>> grad_sum_dims;
  std::vector<Placements> outputs;
  std::vector<Shape> output_shapes;  // empty for replicate-only ops (the local results' shapes)
  std::vector<Shape> local_output_shapes;
  std::vector<SpecPtr> output_specs;  // filled on the first run (the dtype is the local op's)
  // The global specs the local op runs with (LocalCall::layout): inputs with their chosen
  // placements (empty placements for an absent input), outputs as the rule gives them.
  std::vector<DTensorSpec> run_inputs;
  std::vector<DTensorSpec> run_outputs;
  bool in_place = false;
  // Made from a user rule registered with validate: the first call checks it (Note [Checking
  // user rules] in dtensor/rule_check.h).
  bool check_rule = false;
  bool from_user_rule = false;
  PartialFactors partial_factors = PartialFactors::kNone;
  // A view (Note [Global geometry of views]): how far it moves the input's storage offset
  // (nullopt: a fresh tensor), found with the output spec's strides on the first run.
  bool view = false;
  std::optional<int64_t> view_offset_delta;
};

bool acceptable(const Placements& ps, int64_t ndim) {
  bool has_sum_avg = false;
  std::optional<dist::ReduceOp> other;
  for (const Placement& p : ps) {
    if (p.is_shard() && (p.dim() < 0 || p.dim() >= ndim || p.split_factor() < 1)) return false;
    if (!p.is_partial()) continue;
    const dist::ReduceOp op = p.reduce_op();
    if (op == dist::ReduceOp::Sum || op == dist::ReduceOp::Avg) {
      has_sum_avg = true;
    } else if (other.has_value() && *other != op) {
      return false;
    } else {
      other = op;
    }
  }
  return !(has_sum_avg && other.has_value());
}

const OpRule& builtin_rule(const char* op) {
  const RuleTable& table = builtin_rules();
  const auto it = table.find(std::string_view(op));
  TS_INTERNAL_ASSERT(it != table.end(), "the op '", op,
                     "' reached DTensor dispatch but has no entry in the sharding rule table");
  return it->second;
}

UserRule user_rule(const char* op) {
  UserRules& u = user_rules();
  std::lock_guard<std::mutex> lock(u.mutex);
  const auto it = u.rules.find(std::string_view(op));
  return it == u.rules.end() ? UserRule{} : it->second;
}

void check_strategy(const char* op, const ShardingStrategy& s, size_t inputs, size_t outputs) {
  TS_CHECK(s.inputs.size() == inputs && s.outputs.size() == outputs, "[", op,
           "] the sharding rule returned a strategy with ", s.inputs.size(),
           " input placements and ", s.outputs.size(), " output placements; the op has ", inputs,
           " tensor inputs and ", outputs,
           " outputs, and a strategy gives one placement to each (for one mesh dim)");
}

double redistribute_cost(const DTensorSpec& from, const Placements& to) {
  if (from.placements == to) return 0.0;
  const RedistributePlan& plan = plan_redistribute(from, to);
  log_plan_use(plan, PlanUse::kPriced);
  return plan.cost_s;
}

// Note [Backward in the choice]
// While autograd records, moving an input costs twice: forward, and its gradient's way back from
// the placements the input runs with to its own (the dual collective). Counting the forward
// alone, layer_norm over a sharded normalized dim took the all_to_all to S(0) (the cheaper
// forward) and paid a second all_to_all in backward and two all_reduces (weight and bias summed
// over the row shards), where the all_gather to Replicate pays nothing more (PyTorch's layer_norm
// strategy, which also gathers the saved input again in backward). The sums over mesh dims where
// an input runs Replicate beside a sharded output (SumGradOver) are not counted: they are how a
// strategy reduces its parameters' gradients (data parallel's all_reduce), which the user chose.
double backward_cost(const DTensorSpec& in, const Placements& run) {
  if (run == in.placements) return 0.0;
  DTensorSpec grad = in;
  grad.placements = normalize_for_grad(run);
  return redistribute_cost(grad, normalize_for_grad(in.placements));
}

// Note [Partial outputs under autograd]
// The tape records local ops, so a gradient reaches each rank's partial value as it is. That is
// right for P(sum) (d(sum of parts)/d(part) = 1) and wrong for avg (1/n), max and min (only the
// winning rank's part): while recording, outputs may be Partial(sum) only. (A Partial leaf
// itself is fine: redistributing it gives its gradient to the value, Partial -> Replicate.)
bool differentiable_partials(const Placements& ps) {
  for (const Placement& p : ps) {
    if (p.is_partial() && !p.is_partial(dist::ReduceOp::Sum)) return false;
  }
  return true;
}

void set_run_specs(Choice& choice, const Inputs& in) {
  for (size_t i = 0; i < in.specs.size(); ++i) {
    if (in.specs[i] == nullptr) {
      choice.run_inputs.push_back(DTensorSpec{in.mesh, {}, {}, {}, kFloat32});
      continue;
    }
    DTensorSpec s = *in.specs[i];
    s.placements = choice.inputs[i];
    choice.run_inputs.push_back(std::move(s));
  }
}

std::shared_ptr<Choice> choose(const char* op, const Inputs& in, const OpAttrs& attrs,
                               bool recording) {
  const OpRule& builtin = builtin_rule(op);
  const UserRule registered = user_rule(op);
  const bool from_user_rule = registered.rule != nullptr;
  const ShardingRuleFn& rule = from_user_rule ? registered.rule : builtin.strategies;
  const size_t n = in.specs.size();
  auto choice = std::make_shared<Choice>();
  choice->in_place = builtin.in_place;
  choice->from_user_rule = from_user_rule;
  choice->partial_factors = builtin.partial_factors;
  choice->check_rule = from_user_rule && checking_rule(registered.validate);
  choice->view = builtin.view;
  const auto mesh_ndim = static_cast<size_t>(in.mesh.ndim());
  const Placements all_r(mesh_ndim, Replicate());

  ShardingCall call{op, {}, in.mesh, 0, attrs};
  for (const SpecPtr& s : in.specs) {
    call.inputs.push_back(s != nullptr ? *s : DTensorSpec{in.mesh, {}, {}, {}, kFloat32});
  }

  if (rule == nullptr) {  // replicate-only
    for (size_t i = 0; i < n; ++i) choice->inputs.push_back(in.specs[i] ? all_r : Placements{});
    choice->grad_sum_dims.resize(n);
    set_run_specs(*choice, in);
    return choice;
  }
  TS_INTERNAL_ASSERT(builtin.output_shapes != nullptr, "'", op, "' has a rule but no shapes");
  choice->output_shapes = builtin.output_shapes(call);
  const size_t outs = choice->output_shapes.size();
  TS_CHECK_SHAPE(!choice->in_place || choice->output_shapes[0] == in.specs[0]->shape, "[", op,
                 "] output with shape ", in.specs[0]->shape, " doesn't match the broadcast shape ",
                 choice->output_shapes[0]);

  // Strategies per mesh dim, cleaned, all-Replicate added (Note [Bounding the strategy search]).
  std::vector<int64_t> input_ranks(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (in.specs[i] != nullptr) input_ranks[i] = static_cast<int64_t>(in.specs[i]->shape.size());
  }
  std::vector<int64_t> output_ranks;
  for (const Shape& shape : choice->output_shapes) {
    output_ranks.push_back(static_cast<int64_t>(shape.size()));
  }
  std::vector<std::vector<ShardingStrategy>> per_dim(mesh_ndim);
  std::vector<size_t> replicate_at(mesh_ndim);
  for (size_t m = 0; m < mesh_ndim; ++m) {
    call.mesh_dim = static_cast<int64_t>(m);
    per_dim[m] = rule(call);
    for (const ShardingStrategy& s : per_dim[m]) check_strategy(op, s, n, outs);
    replicate_at[m] = clean_strategies(op, per_dim[m], input_ranks, output_ranks, from_user_rule);
  }

  // A combination's price, or nullopt when it is not a candidate.
  std::vector<Placements> cand_in(n, Placements(mesh_ndim, Replicate()));
  std::vector<Placements> cand_out(outs, Placements(mesh_ndim, Replicate()));
  const auto score = [&](const std::vector<size_t>& pick) -> std::optional<CandidateScore> {
    for (size_t m = 0; m < mesh_ndim; ++m) {
      const ShardingStrategy& s = per_dim[m][pick[m]];
      for (size_t i = 0; i < n; ++i) cand_in[i][m] = s.inputs[i];
      for (size_t o = 0; o < outs; ++o) cand_out[o][m] = s.outputs[o];
    }
    for (size_t o = 0; o < outs; ++o) {
      if (!acceptable(cand_out[o], static_cast<int64_t>(choice->output_shapes[o].size())) ||
          (recording && !differentiable_partials(cand_out[o]))) {
        return std::nullopt;
      }
    }
    if (choice->in_place &&
        (cand_in[0] != in.specs[0]->placements || cand_out[0] != in.specs[0]->placements)) {
      return std::nullopt;
    }
    CandidateScore result;
    for (size_t i = 0; i < n; ++i) {
      if (in.specs[i] == nullptr) continue;
      if (!acceptable(cand_in[i], static_cast<int64_t>(in.specs[i]->shape.size()))) {
        return std::nullopt;
      }
      try {
        result.cost += redistribute_cost(*in.specs[i], cand_in[i]);
        if (recording && in.locals[i].requires_grad()) {
          result.cost += backward_cost(*in.specs[i], cand_in[i]);
        }
      } catch (const Error&) {
        return std::nullopt;  // a transition the planner cannot make (e.g. into a product Partial)
      }
      for (size_t m = 0; m < mesh_ndim; ++m) {
        result.changes += cand_in[i][m] != in.specs[i]->placements[m] ? 1 : 0;
      }
    }
    return result;
  };
  bound_strategies(per_dim, replicate_at, score);

  // Every combination, cheapest first-found wins; between equal costs, the one that changes
  // fewer input placements (on a mesh dim of size 1 every transition costs nothing, and keeping
  // [S(2)] beats moving it to an equivalent [S(0)] that later ops may refuse).
  double best = std::numeric_limits<double>::infinity();
  size_t best_changes = std::numeric_limits<size_t>::max();
  std::vector<size_t> pick(mesh_ndim, 0);
  while (true) {
    const std::optional<CandidateScore> candidate = score(pick);
    if (candidate.has_value() && (candidate->cost < best ||
                                  (candidate->cost == best && candidate->changes < best_changes))) {
      best = candidate->cost;
      best_changes = candidate->changes;
      choice->inputs = cand_in;
      choice->outputs = cand_out;
      if (best == 0.0 && best_changes == 0) break;  // nothing is better
    }
    size_t m = mesh_ndim;
    while (m > 0 && ++pick[m - 1] == per_dim[m - 1].size()) pick[--m] = 0;
    if (m == 0) break;
  }
  if (choice->inputs.empty()) {
    TS_CHECK(!choice->in_place, "[", op, "] writes its first argument in place, whose placements ",
             in.specs[0]->placements,
             " cannot hold the result with the other arguments' "
             "placements (no sharding strategy keeps them); redistribute the written DTensor "
             "first, or compute out of place");
    TS_CHECK(false, "[", op, "] no sharding strategy accepts these inputs");
  }
  for (size_t i = 0; i < n; ++i) {
    if (in.specs[i] == nullptr) choice->inputs[i].clear();
  }
  choice->grad_sum_dims.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (in.specs[i] == nullptr) continue;
    for (size_t m = 0; m < mesh_ndim; ++m) {
      if (!choice->inputs[i][m].is_replicate()) continue;
      for (size_t o = 0; o < outs; ++o) {
        if (!choice->outputs[o][m].is_replicate()) {
          choice->grad_sum_dims[i].push_back(static_cast<int64_t>(m));
          break;
        }
      }
    }
  }
  for (size_t o = 0; o < outs; ++o) {
    DTensorSpec s{in.mesh, choice->outputs[o], choice->output_shapes[o],
                  contiguous_strides(choice->output_shapes[o]), kFloat32};
    choice->local_output_shapes.push_back(s.local_shape());
    choice->run_outputs.push_back(std::move(s));
  }
  set_run_specs(*choice, in);
  return choice;
}

struct ChoiceCache {
  uint64_t version = 0;
  std::unordered_map<std::string, std::shared_ptr<Choice>> choices;
};

ChoiceCache& choice_cache() {
  thread_local ChoiceCache cache;
  return cache;
}

std::shared_ptr<Choice> cached_choice(const char* op, const Inputs& in, const OpAttrs& attrs,
                                      bool recording) {
  ChoiceCache& cache = choice_cache();
  const uint64_t version = user_rules().version.load() + cost_model_version();
  if (cache.version != version) {
    cache.choices.clear();
    cache.version = version;
  }
  std::string key = cache_key(op, attrs, in, recording);
  const auto it = cache.choices.find(key);
  if (it != cache.choices.end()) return it->second;
  std::shared_ptr<Choice> choice = choose(op, in, attrs, recording);
  cache.choices.emplace(std::move(key), choice);
  return choice;
}

// ---- running ----

// Note [Writing views of DTensors]
// A view that cuts or regroups a sharded dim (narrow(0, 1, 4) of an S(0) DTensor) runs on a
// redistributed copy: its result holds the right values but shares no data with its base, so an
// in-place op on it would leave the base unchanged where one device writes through. Such writes
// raise, naming the way out; a view that keeps the sharding (a narrow of an unsharded dim) is a
// view of the shard itself and writes through, as on one device.
void check_writes_its_base(const char* op, const Tensor& written) {
  if (!written.is_distributed() || spmd::detail::typed_meta(written) != nullptr) return;
  TS_CHECK(!meta_of(written).view_of_copy, "[", op, "] writes in place a view of a DTensor that ",
           "the view took from a redistributed copy (it cut or regrouped a sharded dim), so the ",
           "write would not reach the DTensor it viewed, as it does on one device; write the base ",
           "DTensor (e.g. through a mask), or redistribute it so that the viewed dims are not ",
           "sharded before taking the view");
}

// The call's inputs with their Partial placements reduced (Note [Partial times a factor that is
// not finite]): run again, the op is offered no Partial strategy.
std::vector<Tensor> reduce_partials(const char* op, const std::vector<Tensor>& tensors,
                                    const Choice& choice) {
  TS_CHECK(!choice.in_place, "[", op,
           "] writes a Partial DTensor in place with a factor that "
           "holds inf or NaN (or a zero divisor): its partial values cannot hold the result (0 * "
           "inf is NaN where one device gives inf); redistribute it to Replicate first, or "
           "compute out of place");
  std::vector<Tensor> reduced = tensors;
  bool any = false;
  for (Tensor& t : reduced) {
    if (!t.is_distributed()) continue;
    const DTensor d(t);
    const Placements whole = normalize_for_grad(d.placements());
    if (whole == d.placements()) continue;
    t = d.redistribute(whole);
    any = true;
  }
  // Only an input's own Partial is reduced; a strategy that made one (from Replicate) beside a
  // bad factor would be chosen again.
  TS_INTERNAL_ASSERT(any, "[", op, "] a Partial strategy met a factor that is not finite, but no ",
                     "input is Partial");
  return reduced;
}

// The first call with a choice made from a checked user rule (Note [Checking user rules]).
void check_choice(const char* op, Choice& choice, const WholeCall& whole,
                  const std::vector<Tensor>& outputs, const DeviceMesh& mesh,
                  const LocalOp& local) {
  choice.check_rule = false;  // once per choice, even when the check raises
  check_rule_result(op, whole, outputs, choice.output_shapes, mesh, choice.inputs, choice.outputs,
                    choice.in_place, local);
}

std::vector<Tensor> dispatch(const char* op, const std::vector<Tensor>& tensors,
                             const OpAttrs& attrs, const LocalOp& local) {
  // Typed local tensors inside local_map(spmd_types=true) are checked, not sharded.
  if (spmd::detail::any_typed(tensors))
    return spmd::detail::typed_dispatch(op, tensors, attrs, local);
  if (std::strcmp(op, "cross_entropy") == 0) {
    if (LossParallelGuard::active()) return loss_parallel_cross_entropy(tensors, attrs);
    if (reduced_cross_entropy_applies(tensors, attrs))
      return {reduced_cross_entropy(tensors, attrs)};
  }
  Inputs in = gather_inputs(op, tensors);
  bool recording = false;
  if (is_grad_enabled()) {
    for (const Tensor& l : in.locals) recording = recording || (l.defined() && l.requires_grad());
  }
  const std::shared_ptr<Choice> choice = cached_choice(op, in, attrs, recording);
  if (choice->in_place) check_writes_its_base(op, tensors[0]);
  std::optional<WholeCall> whole;
  if (choice->check_rule) whole = gather_whole_call(in.locals, in.specs);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (in.specs[i] == nullptr) continue;
    Tensor& l = in.locals[i];
    const Placements& target = choice->inputs[i];
    if (target != in.specs[i]->placements) {
      l = redistribute_local(l, in.specs[i], target, RedistributeOptions{});
    }
    if (recording && !choice->grad_sum_dims[i].empty() && l.requires_grad()) {
      auto spec = std::make_shared<DTensorSpec>(*in.specs[i]);
      spec->placements = target;
      spec->dtype = l.dtype();
      l = sum_grad_over(l, spec, choice->grad_sum_dims[i]);
    }
  }
  if (partials_meet_bad_factor(choice->partial_factors, choice->inputs, in.locals, in.mesh)) {
    return dispatch(op, reduce_partials(op, tensors, *choice), attrs, local);
  }
  const CallLayout layout(op, in.mesh, choice->run_inputs, choice->run_outputs);
  std::vector<Tensor> out;
  try {
    out = local(LocalCall{in.locals, choice->local_output_shapes, layout});
  } catch (const CommError&) {
    throw;
  } catch (const Error& e) {
    rethrow_with_global_shapes(e, op, in.specs, choice->inputs, in.locals);
  }
  if (choice->in_place) {
    if (whole.has_value()) check_choice(op, *choice, *whole, {tensors[0]}, in.mesh, local);
    return {tensors[0]};
  }
  const bool replicate_only = choice->output_shapes.empty();
  if (!replicate_only) {
    TS_INTERNAL_ASSERT(out.size() == choice->output_shapes.size(), "[", op, "] the local op gave ",
                       out.size(), " outputs, the rule ", choice->output_shapes.size());
  }
  std::vector<Tensor> wrapped;
  wrapped.reserve(out.size());
  if (choice->output_specs.size() != out.size()) choice->output_specs.assign(out.size(), nullptr);
  for (size_t o = 0; o < out.size(); ++o) {
    SpecPtr& spec = choice->output_specs[o];
    if (spec == nullptr || spec->dtype != out[o].dtype()) {
      const Shape shape = replicate_only ? out[o].sizes() : choice->output_shapes[o];
      const Placements ps = replicate_only
                                ? Placements(static_cast<size_t>(in.mesh.ndim()), Replicate())
                                : choice->outputs[o];
      Shape stride = contiguous_strides(shape);
      if (choice->view) {
        ViewGeometry geometry = global_view_geometry(op, tensors[0], shape, local, layout);
        stride = std::move(geometry.stride);
        choice->view_offset_delta = geometry.offset_delta;
      }
      spec = std::make_shared<DTensorSpec>(
          DTensorSpec{in.mesh, ps, shape, std::move(stride), out[o].dtype()});
    }
    if (!replicate_only && out[o].sizes() != choice->local_output_shapes[o]) {
      // A rule's output placements that the local op's result does not fit.
      TS_CHECK(!choice->from_user_rule, "[", op, "] the sharding rule registered for '", op,
               "' gives output ", o, " placements ", spec->placements,
               ", under which global shape ", spec->shape, " gives this rank a shard of shape ",
               choice->local_output_shapes[o], ", but the op run with the inputs' placements ",
               describe_placements(choice->inputs), " computes a local result of shape ",
               out[o].sizes(),
               "; the rule's output placements must be what the op gives for its input placements");
      TS_INTERNAL_ASSERT(false, "[", op, "] output ", o, " of the local op has shape ",
                         out[o].sizes(), " but placements ", spec->placements, " of global shape ",
                         spec->shape, " give this rank ", choice->local_output_shapes[o]);
    }
    wrapped.push_back(make_distributed(out[o], spec));
    if (choice->view) {
      meta_of(wrapped.back()).view_of_copy =
          meta_of(tensors[0]).view_of_copy || choice->inputs[0] != in.specs[0]->placements;
    }
    if (choice->view_offset_delta.has_value()) {
      wrapped.back().unsafe_impl()->offset =
          tensors[0].storage_offset() + *choice->view_offset_delta;
    }
  }
  if (whole.has_value()) check_choice(op, *choice, *whole, wrapped, in.mesh, local);
  return wrapped;
}

// ---- the other hooks ----

// Local SPMD-typed tensors are distributed tensors too (Note [Local SPMD types] in
// dtensor/spmd_types/local_types.h); their hooks live beside their checker.
bool typed(const Tensor& t) { return spmd::detail::typed_meta(t) != nullptr; }

Tensor full_tensor_hook(const Tensor& t) {
  return typed(t) ? spmd::detail::typed_full_tensor(t) : DTensor(t).full_tensor();
}

Tensor local_hook(const Tensor& t) {
  return typed(t) ? spmd::detail::typed_local(t) : ready_local(t);
}

Tensor wrap_like_hook(const Tensor& local, const Tensor& like, bool as_grad) {
  if (typed(like)) return spmd::detail::typed_wrap_like(local, like, as_grad);
  auto spec = std::make_shared<DTensorSpec>(*meta_of(like).spec);
  if (as_grad) spec->placements = normalize_for_grad(spec->placements);
  spec->dtype = local.dtype();
  return make_distributed(local, std::move(spec));
}

Tensor grad_local_hook(const Tensor& grad, const Tensor& like, const char* op) {
  if (typed(like)) return spmd::detail::typed_grad_local(grad, like, op);
  const DTensor self(like);
  TS_CHECK_SHAPE(grad.sizes() == like.sizes(), "[", op, "] gradient of shape ", grad.sizes(),
                 " for a DTensor of shape ", like.sizes());
  const DTensor g = grad.is_distributed()
                        ? DTensor(grad)
                        : distribute_tensor(grad, self.device_mesh(), {}, std::nullopt);
  TS_CHECK(g.device_mesh() == self.device_mesh(), "[", op, "] gradient on mesh ", g.device_mesh(),
           " for a DTensor on mesh ", self.device_mesh());
  return g.redistribute(normalize_for_grad(self.placements())).to_local();
}

std::string describe_hook(const Tensor& t) {
  if (typed(t)) return spmd::detail::typed_describe(t);
  std::ostringstream os;
  os << DTensor(t);
  return os.str();
}

bool same_layout_hook(const Tensor& a, const Tensor& b) {
  if (typed(a) || typed(b)) return false;
  const DTensorSpec& x = *meta_of(a).spec;
  const DTensorSpec& y = *meta_of(b).spec;
  return x.mesh == y.mesh && x.placements == y.placements && x.shape == y.shape &&
         x.stride == y.stride;
}

}  // namespace
}  // namespace dtensor

void install_distributed_hooks(DistributedHooks& hooks) {
  hooks.dispatch = dtensor::dispatch;
  hooks.full_tensor = dtensor::full_tensor_hook;
  hooks.local = dtensor::local_hook;
  hooks.wrap_like = dtensor::wrap_like_hook;
  hooks.grad_local = dtensor::grad_local_hook;
  hooks.describe = dtensor::describe_hook;
  hooks.same_layout = dtensor::same_layout_hook;
}

void register_sharding(const std::string& op, ShardingRuleFn rule,
                       RegisterShardingOptions options) {
  const dtensor::RuleTable& table = dtensor::builtin_rules();
  TS_CHECK(table.count(op) == 1, "[register_sharding] '", op,
           "' is not an op of the registry (names as runtime/ops pass them: \"add\", \"mul_\", "
           "\"sum\", \"matmul\", \"view\", ...; see dtensor/README.md)");
  TS_CHECK(rule != nullptr, "[register_sharding] empty rule for '", op, "'");
  dtensor::UserRules& u = dtensor::user_rules();
  std::lock_guard<std::mutex> lock(u.mutex);
  u.rules[op] = dtensor::UserRule{std::move(rule), options.validate};
  ++u.version;
}

void unregister_sharding(const std::string& op) {
  TS_CHECK(dtensor::builtin_rules().count(op) == 1, "[unregister_sharding] '", op,
           "' is not an op of the registry");
  dtensor::UserRules& u = dtensor::user_rules();
  std::lock_guard<std::mutex> lock(u.mutex);
  u.rules.erase(op);
  ++u.version;
}

std::vector<std::string> sharding_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, rule] : dtensor::builtin_rules()) names.push_back(name);
  return names;
}

std::string replicate_only_reason(const std::string& op) {
  const auto it = dtensor::builtin_rules().find(op);
  TS_CHECK(it != dtensor::builtin_rules().end(), "[replicate_only_reason] '", op,
           "' is not an op of the registry");
  return it->second.replicate_only_reason;
}

void clear_sharding_cache() { dtensor::choice_cache().choices.clear(); }

ImplicitReplicationGuard::ImplicitReplicationGuard() { ++dtensor::implicit_replication_depth; }
ImplicitReplicationGuard::~ImplicitReplicationGuard() { --dtensor::implicit_replication_depth; }
bool ImplicitReplicationGuard::active() { return dtensor::implicit_replication_depth > 0; }

}  // namespace tessera
