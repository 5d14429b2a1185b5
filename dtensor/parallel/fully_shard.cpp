#include "tessera/dtensor/parallel/fully_shard.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tessera/autograd/engine.h"
#include "tessera/autograd/function.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/parallel/distribute_module.h"
#include "tessera/dtensor/parallel/module_keys.h"
#include "tessera/dtensor/sharding.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera {

namespace {

constexpr const char* kFsdpKey = detail::kFullyShardKey;

// Where a module registers a managed parameter: a tied weight has several (module, name) uses.
struct ParamUse {
  nn::Module* module = nullptr;
  std::string name;
  std::string path;  // from the fully_shard'ed module, for errors
};

// A parameter one fully_shard manages, and where its shard sits in the module's flat buffer.
struct ManagedParam {
  std::vector<ParamUse> uses;
  Tensor param;  // the registered Shard(0) DTensor
  Shape shape;
  int64_t rows = 0;
  int64_t row_numel = 0;
  int64_t chunk_rows = 0;  // torch.chunk's chunk: ceil(rows / ranks); every rank pads to it
  int64_t offset = 0;      // of this parameter's chunk in the flat buffer, in elements
  // A parameter a parallel style had made a DTensor on the "tp" dim of a 2-D mesh: shape, rows
  // and the gathered tensor are its tensor-parallel local shard, which forward sees wrapped as
  // that DTensor again (tp_spec's mesh, placements and global shape).
  std::shared_ptr<const DTensorSpec> tp_spec;
};

// An all_gather of a unit's flat shards issued ahead of the unit's call (Note [FSDP prefetch]):
// the shards it gathers (the autograd input of the call's gather) and the buffer it fills.
struct PendingGather {
  Tensor flat;
  Tensor gathered;
  dist::WorkPtr work;
};

struct FsdpState;

// Note [FSDP prefetch]
// As torch's FSDP2, a unit's all_gather is issued before the unit needs it, so that it runs on the
// group's progress thread while the previous unit computes: forward, when unit i starts, it
// issues unit i + 1's gather (asynchronously), and unit i + 1 waits for it instead of gathering;
// backward, when a resharded unit gathers its parameters again, it issues the same for the unit
// before it in forward order. The order is the one the first forward ran (recorded by the root
// unit, the outermost, over its subtree's units): a forward that calls the units in another
// order stops prefetching for that forward (each unit then gathers for itself) rather than wait
// for a gather of the wrong unit. At most two units are unsharded at once, the current and the
// next, as FSDP2. Every rank runs the same module code, so every rank issues the same gathers in
// the same order on each group.
struct Schedule {
  std::vector<std::weak_ptr<FsdpState>> order;  // the units' calls in the first forward
  bool recorded = false;
  bool recording = false;
  bool in_order = true;  // this forward's calls so far follow `order`
  size_t calls = 0;      // this forward's unit calls so far
  // Completes the units' reduce_scatter in flight in backward, if one is.
  std::function<void()> reduce_in_flight;
};

struct FsdpState {
  dist::ProcessGroupPtr group;
  FullyShardOptions options;
  std::vector<ManagedParam> params;
  int64_t flat_numel = 0;  // per rank
  // Inside a module fully_shard'ed later. The outermost one (the root) keeps its parameters
  // unsharded from forward to backward, as torch's FSDP2 does: backward would gather them again
  // at once.
  bool inner = false;
  // The prefetch schedule of the outermost unit this one is in (its own when it is the root).
  std::shared_ptr<Schedule> schedule = std::make_shared<Schedule>();
  // Where this unit's call is in schedule->order (its last call there).
  size_t position = 0;
  std::shared_ptr<PendingGather> forward_prefetch, backward_prefetch;
};

int64_t rows_of_rank(const ManagedParam& p, int64_t rank) {
  return std::max<int64_t>(0, std::min(p.chunk_rows, p.rows - rank * p.chunk_rows));
}

// Each rank's padded flat buffer of its shards (in param_dtype), differentiable.
Tensor flat_shards(const FsdpState& s) {
  std::vector<Tensor> pieces;
  for (const ManagedParam& p : s.params) {
    Tensor flat = DTensor(p.param).to_local().reshape({-1});
    if (s.options.param_dtype.has_value()) flat = flat.to(*s.options.param_dtype);
    const int64_t pad = p.chunk_rows * p.row_numel - flat.numel();
    if (pad > 0) flat = cat({flat, zeros({pad}, flat.options())});
    pieces.push_back(flat);
  }
  return cat(pieces);
}

// Parameter p's part of rank r in the gathered buffer (or its gradient).
Tensor gathered_part(const FsdpState& s, const Tensor& gathered, const ManagedParam& p, int64_t r) {
  return gathered.narrow(0, r * s.flat_numel + p.offset, rows_of_rank(p, r) * p.row_numel);
}

// Copies parameter p's parts of the gathered buffer, rank by rank, into `dst` (p's unsharded
// elements in order), or the reverse (`to_gathered`), with the copy kernel: no autograd, no
// version bump.
void copy_parts(const FsdpState& s, const Tensor& gathered, const ManagedParam& p,
                const Tensor& dst, bool to_gathered) {
  const Tensor flat = dst.view({-1});
  int64_t at = 0;
  for (int64_t r = 0; r < s.group->size(); ++r) {
    const Tensor part = gathered_part(s, gathered, p, r);
    const Tensor mine = flat.narrow(0, at, part.numel());
    kernels_for(flat, "fully_shard").copy(to_gathered ? part : mine, to_gathered ? mine : part);
    at += part.numel();
  }
}

// Issues the all_gather of `flat` (a unit's flat shards) on the unit's group.
std::shared_ptr<PendingGather> issue_gather(const FsdpState& s, const Tensor& flat, bool async) {
  auto g = std::make_shared<PendingGather>();
  g->flat = flat.contiguous();
  g->gathered = Tensor::make_empty({s.group->size() * flat.numel()}, flat.dtype(), flat.device());
  g->work = s.group->all_gather_into_tensor(g->gathered, g->flat, {.async_op = async});
  return g;
}

// The gathered buffer of `pending` once its all_gather completed.
Tensor completed(const std::shared_ptr<PendingGather>& pending) {
  pending->work->wait();
  return pending->gathered;
}

Tensor all_gather_flat(const FsdpState& s, const Tensor& flat) {
  return completed(issue_gather(s, flat, /*async=*/false));
}

// Adds each managed parameter's part of this rank's reduced flat buffer (`reduced`, the
// reduce_scatter's output) into its shard's .grad(), as autograd would have through flat_shards:
// the padding dropped, in the parameter's shape and dtype, as a DTensor of the parameter's spec.
void accumulate_into_shards(const FsdpState& s, const Tensor& reduced) {
  NoGradGuard no_grad;
  for (const ManagedParam& p : s.params) {
    if (!p.param.requires_grad()) continue;
    const DTensor param(p.param);
    const Tensor local_shard = param.to_local();
    const Tensor local = reduced.narrow(0, p.offset, local_shard.numel())
                             .reshape(local_shard.sizes())
                             .to(local_shard.dtype());
    const DTensorSpec& spec = param.spec();
    const Tensor grad = DTensor::from_local(local, spec.mesh, spec.placements,
                                            {.shape = spec.shape, .stride = spec.stride});
    Tensor existing = p.param.grad();
    if (existing.defined()) {
      existing += grad;
    } else {
      p.param.set_grad(grad);
    }
  }
}

// A unit's reduce_scatter in flight (Note [FSDP reduce_scatter in flight]): its buffers until it
// completes and its gradients are in the shards.
struct PendingReduce {
  std::shared_ptr<const FsdpState> unit;
  Tensor whole, out;
  dist::WorkPtr work;
};

// Completes `r` once: waits, adds its gradients into the shards, lets its buffers go.
void finish(PendingReduce& r) {
  if (r.work == nullptr) return;
  r.work->wait();
  r.work = nullptr;
  accumulate_into_shards(*r.unit, r.out);
  r.whole = Tensor();
  r.out = Tensor();
}

// Each rank's flat buffer gathered and cut into the unsharded parameters. Backward writes their
// gradients into one gathered-layout buffer (zeros where ranks padded) and reduce_scatters it,
// averaged: each rank's loss is the mean over its own batch, so the average is the gradient of
// the whole batch's mean, as one device computes it. One pass each way, whatever the number of
// parameters and ranks.
struct GatherUnflatten : autograd::Function<GatherUnflatten> {
  static const char* name() { return "FullyShardAllGather"; }
  // `prefetched`: the all_gather of `flat` issued ahead (Note [FSDP prefetch]), or null.
  static std::vector<Tensor> forward(autograd::AutogradContext* ctx, const Tensor& flat,
                                     std::shared_ptr<const FsdpState> s,
                                     std::optional<DType> reduce_dtype,
                                     std::shared_ptr<PendingGather> prefetched) {
    const Tensor gathered = prefetched ? completed(prefetched) : all_gather_flat(*s, flat);
    std::vector<Tensor> unsharded;
    for (const ManagedParam& p : s->params) {
      unsharded.push_back(Tensor::make_empty(p.shape, flat.dtype(), flat.device()));
      copy_parts(*s, gathered, p, unsharded.back(), /*to_gathered=*/false);
    }
    ctx->saved_data["state"] = s;
    ctx->saved_data["reduce_dtype"] = reduce_dtype;
    ctx->saved_data["dtype"] = flat.dtype();
    return unsharded;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const auto s = std::any_cast<std::shared_ptr<const FsdpState>>(ctx->saved_data.at("state"));
    const auto reduce = std::any_cast<std::optional<DType>>(ctx->saved_data.at("reduce_dtype"));
    const DType dtype = std::any_cast<DType>(ctx->saved_data.at("dtype"));
    const DType reduce_in = reduce.value_or(dtype);
    const int64_t n = s->group->size();
    const Tensor whole =
        zeros({n * s->flat_numel}, TensorOptions(reduce_in).device(grads[0].device()));
    for (size_t i = 0; i < s->params.size(); ++i) {
      copy_parts(*s, whole, s->params[i], grads[i].to(reduce_in).contiguous(),
                 /*to_gathered=*/true);
    }
    Tensor out = Tensor::make_empty({s->flat_numel}, reduce_in, whole.device());
    // Note [FSDP reduce_scatter in flight]: the reduce_scatter runs on the group's progress
    // thread while backward computes the units before this one; the gradients reach the shards
    // when the pass has run every node (a callback, in issue order), before backward returns
    // and so before an optimizer reads them. A pass that returns its gradients (autograd::grad)
    // or records a graph of them (create_graph) takes them through autograd, waiting here.
    if (autograd::pass_returns_gradients() || is_grad_enabled()) {
      s->group->reduce_scatter_tensor(out, whole, dist::ReduceOp::Avg)->wait();
      return {out.to(dtype)};
    }
    // One reduce_scatter in flight at a time, as FSDP2's: the previous one completes now, so
    // that its buffers go before this one's are held.
    Schedule& schedule = *s->schedule;
    if (schedule.reduce_in_flight) schedule.reduce_in_flight();
    auto pending = std::make_shared<PendingReduce>();
    pending->unit = s;
    pending->whole = whole;
    pending->out = out;
    pending->work =
        s->group->reduce_scatter_tensor(out, whole, dist::ReduceOp::Avg, {.async_op = true});
    // Weak: the pass's callback owns it (a failed pass drops both).
    schedule.reduce_in_flight = [weak = std::weak_ptr<PendingReduce>(pending)] {
      if (const std::shared_ptr<PendingReduce> p = weak.lock()) finish(*p);
    };
    autograd::queue_callback([pending, schedule = s->schedule] {
      finish(*pending);
      schedule->reduce_in_flight = nullptr;
    });
    return {Tensor()};
  }
};

// The gathered tensor-parallel shard as the DTensor the parallel style made (differentiable: its
// gradient comes back as that shard's).
Tensor as_tensor_parallel(const Tensor& local, const DTensorSpec& spec) {
  return DTensor::from_local(local, spec.mesh, spec.placements,
                             {.shape = spec.shape, .stride = spec.stride});
}

// Issues the next unit's all_gather ahead of its call (Note [FSDP prefetch]), where this forward
// follows the recorded order and the next unit has parameters and no gather in flight.
void prefetch_forward(Schedule& schedule, size_t next) {
  if (!schedule.recorded || !schedule.in_order || next >= schedule.order.size()) return;
  const std::shared_ptr<FsdpState> unit = schedule.order[next].lock();
  if (unit == nullptr || unit->params.empty() || unit->forward_prefetch != nullptr) return;
  unit->forward_prefetch = issue_gather(*unit, flat_shards(*unit), /*async=*/true);
}

// A unit's call starts: records it in the first forward, else checks it against the order and
// prefetches the next unit.
void on_call(const std::shared_ptr<FsdpState>& s) {
  Schedule& schedule = *s->schedule;
  if (!s->inner) {  // the root: a forward starts
    schedule.recording = !schedule.recorded;
    schedule.in_order = true;
    schedule.calls = 0;
    if (schedule.recording) schedule.order.clear();
  }
  const size_t at = schedule.calls++;
  if (schedule.recording) {
    s->position = at;
    schedule.order.push_back(s);
    return;
  }
  if (at >= schedule.order.size() || schedule.order[at].lock() != s) schedule.in_order = false;
  prefetch_forward(schedule, at + 1);
}

// The root's forward ended: the order is recorded; a gather prefetched for a call that did not
// come (the forward took another path) completes now, and its buffer goes.
void on_forward_end(const FsdpState& root) {
  Schedule& schedule = *root.schedule;
  if (schedule.recording) {
    schedule.recording = false;
    schedule.recorded = true;
  }
  for (const std::weak_ptr<FsdpState>& u : schedule.order) {
    if (const std::shared_ptr<FsdpState> unit = u.lock(); unit && unit->forward_prefetch) {
      completed(unit->forward_prefetch);
      unit->forward_prefetch = nullptr;
    }
  }
}

// Gathers the managed parameters and installs the unsharded ones for this call; returns them.
std::vector<Tensor> unshard(const std::shared_ptr<FsdpState>& s) {
  on_call(s);
  if (s->params.empty()) return {};  // a root whose parameters inner fully_shards manage
  const std::optional<DType> reduce =
      s->options.reduce_dtype.has_value() ? s->options.reduce_dtype : s->options.param_dtype;
  std::shared_ptr<PendingGather> prefetched = std::move(s->forward_prefetch);
  s->forward_prefetch = nullptr;
  const Tensor flat = prefetched ? prefetched->flat : flat_shards(*s);
  std::vector<Tensor> unsharded = GatherUnflatten::apply(flat, s, reduce, prefetched);
  for (size_t i = 0; i < s->params.size(); ++i) {
    const ManagedParam& p = s->params[i];
    const Tensor installed =
        p.tp_spec == nullptr ? unsharded[i] : as_tensor_parallel(unsharded[i], *p.tp_spec);
    for (const ParamUse& use : p.uses) use.module->override_parameter(use.name, installed);
  }
  return unsharded;
}

// Whether backward gathers the unit's parameters again (reshard, below).
bool resharded(const FsdpState& s) {
  return s.options.reshard_after_forward && s.inner && !s.params.empty();
}

// Backward's prefetch (Note [FSDP prefetch]): the all_gather of the resharded unit that backward
// reaches next, the nearest before `s` in forward order, issued now.
void prefetch_backward(const FsdpState& s) {
  const Schedule& schedule = *s.schedule;
  if (!schedule.recorded || s.position >= schedule.order.size()) return;
  for (size_t i = s.position; i-- > 0;) {
    const std::shared_ptr<FsdpState> unit = schedule.order[i].lock();
    if (unit == nullptr || !resharded(*unit)) continue;
    if (unit->backward_prefetch == nullptr) {
      unit->backward_prefetch = issue_gather(*unit, flat_shards(*unit), /*async=*/true);
    }
    return;
  }
}

// Before backward reaches a resharded call: gathers the shards again into the unsharded tensors
// forward saved (their memory was released), without a version bump: the values are those
// saved.
void refill(FsdpState& s, const std::vector<Tensor>& unsharded) {
  NoGradGuard no_grad;
  const std::shared_ptr<PendingGather> prefetched = std::move(s.backward_prefetch);
  s.backward_prefetch = nullptr;
  const Tensor gathered = prefetched ? completed(prefetched) : all_gather_flat(s, flat_shards(s));
  prefetch_backward(s);
  for (size_t i = 0; i < s.params.size(); ++i) {
    unsharded[i].storage()->reacquire_memory();
    copy_parts(s, gathered, s.params[i], unsharded[i], /*to_gathered=*/false);
  }
}

// After forward: the registered shards are what the module shows again; with
// reshard_after_forward the unsharded tensors give their memory back until backward needs them.
void reshard(const std::shared_ptr<FsdpState>& s, const std::vector<Tensor>& unsharded,
             const Tensor& output) {
  for (const ManagedParam& p : s->params) {
    for (const ParamUse& use : p.uses) use.module->restore_parameter(use.name);
  }
  if (!s->inner) on_forward_end(*s);
  if (!resharded(*s) || unsharded.empty()) return;
  for (const Tensor& u : unsharded) u.storage()->release_memory();
  if (output.defined() && output.requires_grad()) {
    output.register_hook([s, unsharded](const Tensor&) {
      refill(*s, unsharded);
      return Tensor();
    });
  }
}

// The runs of `runs` (one tensor dim's global indices, in local order) at local positions
// [start, start + length), empty runs dropped.
std::vector<dtensor::Run> narrow_runs(const std::vector<dtensor::Run>& runs, int64_t start,
                                      int64_t length) {
  std::vector<dtensor::Run> out;
  int64_t at = 0;
  for (const dtensor::Run& r : runs) {
    const int64_t lo = std::max(start, at), hi = std::min(start + length, at + r.size);
    if (lo < hi) out.push_back({r.offset + lo - at, hi - lo});
    at += r.size;
  }
  return out;
}

std::vector<std::vector<dtensor::Run>> without_empty_runs(
    std::vector<std::vector<dtensor::Run>> d) {
  for (auto& runs : d) std::erase_if(runs, [](const dtensor::Run& r) { return r.size == 0; });
  return d;
}

// A parameter that a parallel style made a DTensor on the "tp" dim of a 2-D mesh whose other
// dim is `dp`: registers its dp chunk (of the tp shard's rows) as a DTensor on the 2-D mesh,
// Shard(0) on dp (StridedShard(0, tp size) when tp shards rows too and dp comes first in the
// mesh, as torch's FSDP2 + TP), the tp placement on tp.
Tensor shard_tensor_parallel(const std::string& path, const DTensor& d, const DeviceMesh& dp,
                             ManagedParam& p) {
  const DeviceMesh& tp = d.device_mesh();
  const DeviceMesh root = dp.root_mesh();
  TS_CHECK(tp.ndim() == 1 && root.ndim() == 2 && tp.root_mesh() == root &&
               tp.root_dims() != dp.root_dims(),
           "[fully_shard] parameter '", path, "' is a DTensor on ", tp.to_string(),
           "; fully_shard shards a DTensor parameter only on the other dim of the 2-D mesh its "
           "mesh is a dim of (e.g. parallelize_module(m, mesh[\"tp\"], plan) then fully_shard(m, "
           "mesh[\"dp\"])), and this mesh is ",
           dp.to_string(), " of ", root.to_string());
  const Placement tp_placement = d.placements()[0];
  TS_CHECK(
      tp_placement.is_replicate() || (tp_placement.is_shard() && !tp_placement.is_strided_shard()),
      "[fully_shard] parameter '", path, "' has placement ", tp_placement.to_string(), " on ",
      tp.to_string(), "; fully_shard takes Replicate or Shard(d) tensor-parallel parameters");
  const int64_t dp_dim = dp.root_dims()[0], tp_dim = tp.root_dims()[0];
  Placements placements(2, Replicate());
  placements[tp_dim] = tp_placement;
  placements[dp_dim] = tp_placement.is_shard(0) && dp_dim < tp_dim
                           ? Placement(StridedShard(0, root.size(tp_dim)))
                           : Placement(Shard(0));
  DTensorSpec spec{root, placements, d.sizes(), d.spec().stride, d.dtype()};
  // Every rank's dp chunk of its tp shard's rows must be the block the 2-D placements give it
  // (uneven tp shards can make StridedShard describe another one, e.g. 7 rows on dp 3 x tp 2).
  // Checked for all ranks, so that all raise or none.
  for (int64_t i = 0; i < dp.size(); ++i) {
    for (int64_t j = 0; j < tp.size(); ++j) {
      const std::vector<int64_t> tp_coord{j};
      std::vector<int64_t> coord(2);
      coord[dp_dim] = i;
      coord[tp_dim] = j;
      const dtensor::Run rows = dtensor::chunk_of(d.spec().local_shape(tp_coord)[0], dp.size(), i);
      auto expected = d.spec().global_runs(tp_coord);
      expected[0] = narrow_runs(expected[0], rows.offset, rows.size);
      TS_CHECK(without_empty_runs(expected) == without_empty_runs(spec.global_runs(coord)),
               "[fully_shard] parameter '", path, "' of shape ", d.sizes(), " with ",
               tp_placement.to_string(), " on ", tp.to_string(), ": cutting its tensor-parallel ",
               "shards' rows over ", dp.size(), " data-parallel ranks gives blocks that ",
               "placements ", placements, " on ", root.to_string(),
               " do not describe; make dim 0 divisible by the mesh size");
    }
  }
  p.tp_spec = d.spec_ptr();
  const dtensor::Run rows = dtensor::chunk_of(p.rows, dp.size(), dp.get_local_rank(0));
  Tensor leaf;
  {
    NoGradGuard no_grad;
    const Tensor chunk = d.to_local().detach().narrow(0, rows.offset, rows.size).clone();
    leaf =
        DTensor::from_local(chunk, root, placements, {.shape = spec.shape, .stride = spec.stride});
  }
  if (d.requires_grad()) leaf.requires_grad_();
  return leaf;
}

// Which unit manages each sharded parameter, per rank thread: a parameter reached again from
// another module (a tied weight) is found whichever path reaches it. The state holds the
// parameter, so a live entry's TensorImpl is never reused.
std::unordered_map<const TensorImpl*, std::weak_ptr<FsdpState>>& managed_params() {
  thread_local std::unordered_map<const TensorImpl*, std::weak_ptr<FsdpState>> registry;
  return registry;
}

// Drops the entries of units that died (once per fully_shard call, not per lookup).
void forget_dead_units() {
  std::erase_if(managed_params(), [](const auto& entry) { return entry.second.expired(); });
}

std::shared_ptr<FsdpState> unit_of(const Tensor& param) {
  auto& registry = managed_params();
  const auto it = registry.find(param.unsafe_impl());
  return it == registry.end() ? nullptr : it->second.lock();
}

// Recomputes where each parameter's chunk sits in the unit's flat buffer (after one moved out).
void relayout(FsdpState& s) {
  s.flat_numel = 0;
  for (ManagedParam& p : s.params) {
    p.offset = s.flat_numel;
    s.flat_numel += p.chunk_rows * p.row_numel;
  }
}

// Sharding one module's subtree: the modules whose parameters it manages are those not inside an
// inner fully_shard. Each module and each parameter is handled once, as named_parameters lists
// them: a module at two paths is one module, a tied weight one parameter with several uses.
// FSDP2 assigns a shared parameter to the unit of its uses' lowest common ancestor, so a tied
// weight an inner unit took moves to this one when a module outside the inner unit uses it too.
class Collector {
 public:
  Collector(const DeviceMesh& mesh, std::shared_ptr<FsdpState> state)
      : mesh_(mesh), state_(std::move(state)) {}

  // Everything that can fail is checked before any parameter changes: a parameter of another
  // unit outside this subtree (a tie between sibling units) leaves the module as it was.
  void check(nn::Module& root) {
    std::unordered_set<const nn::Module*> seen;
    find_inner_units(root, true, seen);
    seen.clear();
    check_shared(root, "", true, seen);
  }

  void collect(nn::Module& m, const std::string& prefix, bool is_root) {
    if (!visited_.insert(&m).second) return;
    if (!is_root && m.extension(kFsdpKey) != nullptr) {
      std::static_pointer_cast<FsdpState>(m.extension(kFsdpKey))->inner = true;
      share_schedule(m);
      return;
    }
    for (const auto& [name, t] : m.named_parameters(/*recurse=*/false)) {
      const ParamUse use{&m, name, prefix + name};
      const auto known = index_.find(t.unsafe_impl());
      if (known != index_.end()) {
        state_->params[known->second].uses.push_back(use);
      } else if (std::shared_ptr<FsdpState> unit = unit_of(t); unit != nullptr) {
        adopt(*unit, t, use);
      } else {
        add_new(m, t, use);
      }
    }
    for (const auto& [name, child] : m.named_children()) {
      collect(*child, prefix + name + ".", false);
    }
  }

 private:
  void find_inner_units(nn::Module& m, bool is_root, std::unordered_set<const nn::Module*>& seen) {
    if (!seen.insert(&m).second) return;
    TS_CHECK(m.extension(detail::kReplicateKey) == nullptr, "[fully_shard] ",
             is_root ? "this " : "a submodule of this module, a ", m.name(),
             ", was replicate()'d: its parameters are replicated, and averaged by replicate's "
             "buckets; a module is either replicated (replicate) or sharded (fully_shard), not "
             "both");
    if (!is_root && m.extension(kFsdpKey) != nullptr) {
      inner_units_.insert(static_cast<const FsdpState*>(m.extension(kFsdpKey).get()));
    }
    for (const auto& entry : m.named_children()) find_inner_units(*entry.second, false, seen);
  }

  void check_shared(nn::Module& m, const std::string& prefix, bool is_root,
                    std::unordered_set<const nn::Module*>& seen) {
    if (!seen.insert(&m).second) return;
    if (!is_root && m.extension(kFsdpKey) != nullptr) return;
    for (const auto& [name, t] : m.named_parameters(/*recurse=*/false)) {
      const std::shared_ptr<FsdpState> unit = unit_of(t);
      if (unit == nullptr) continue;
      const ParamUse& other = owner_use(*unit, t);
      TS_CHECK(inner_units_.contains(unit.get()), "[fully_shard] parameter '", prefix, name,
               "' of this ", m.name(), " is also parameter '", other.path, "' of a ",
               other.module->name(),
               " that another fully_shard manages, outside the subtree of the module being "
               "sharded now; a shared (tied) parameter belongs to the unit of its uses' lowest "
               "common ancestor: fully_shard that ancestor, and not the modules in between");
      TS_CHECK(DTensor(t).device_mesh() == mesh_, "[fully_shard] parameter '", prefix, name,
               "' is shared with '", other.path, "', sharded by an inner fully_shard on ",
               DTensor(t).device_mesh().to_string(), ", but this fully_shard's mesh is ",
               mesh_.to_string(), "; shard a tied parameter's units on one mesh");
    }
    for (const auto& [name, child] : m.named_children()) {
      check_shared(*child, prefix + name + ".", false, seen);
    }
  }

  // Every unit in m's subtree, at any depth, prefetches in the order this one records (Note
  // [FSDP prefetch]).
  void share_schedule(nn::Module& m) {
    if (!schedule_shared_.insert(&m).second) return;
    if (m.extension(kFsdpKey) != nullptr) {
      std::static_pointer_cast<FsdpState>(m.extension(kFsdpKey))->schedule = state_->schedule;
    }
    for (const auto& entry : m.named_children()) share_schedule(*entry.second);
  }

  static const ParamUse& owner_use(const FsdpState& unit, const Tensor& t) {
    for (const ManagedParam& p : unit.params) {
      if (p.param.unsafe_impl() == t.unsafe_impl()) return p.uses.front();
    }
    TS_INTERNAL_ASSERT(false, "[fully_shard] a registered parameter its unit does not hold");
    return unit.params.front().uses.front();
  }

  // Moves the parameter an inner unit manages into this one, with one more use.
  void adopt(FsdpState& unit, const Tensor& t, const ParamUse& use) {
    const auto it = std::find_if(unit.params.begin(), unit.params.end(), [&](const auto& p) {
      return p.param.unsafe_impl() == t.unsafe_impl();
    });
    TS_INTERNAL_ASSERT(it != unit.params.end(), "[fully_shard] a tied parameter's unit lost it");
    ManagedParam p = std::move(*it);
    unit.params.erase(it);
    relayout(unit);
    p.uses.push_back(use);
    push(std::move(p));
  }

  void add_new(nn::Module& m, const Tensor& t, const ParamUse& use) {
    TS_CHECK(t.dim() >= 1, "[fully_shard] parameter '", use.path,
             "' is 0-dim; fully_shard shards dim 0 of every parameter");
    // A DTensor parameter is sharded over dp as its tensor-parallel shard.
    const Tensor local = t.is_distributed() ? DTensor(t).to_local() : t;
    const int64_t n = mesh_.size();
    ManagedParam p;
    p.uses.push_back(use);
    p.shape = local.sizes();
    p.rows = local.size(0);
    p.row_numel = p.rows == 0 ? 0 : local.numel() / p.rows;
    p.chunk_rows = (p.rows + n - 1) / n;
    const Tensor sharded = t.is_distributed()
                               ? shard_tensor_parallel(use.path, DTensor(t), mesh_, p)
                               : detail::distribute_leaf(t, mesh_, {Shard(0)});
    p.param = m.register_parameter(use.name, sharded, t.requires_grad());
    push(std::move(p));
  }

  void push(ManagedParam p) {
    p.offset = state_->flat_numel;
    state_->flat_numel += p.chunk_rows * p.row_numel;
    index_[p.param.unsafe_impl()] = state_->params.size();
    managed_params()[p.param.unsafe_impl()] = state_;
    state_->params.push_back(std::move(p));
  }

  const DeviceMesh& mesh_;
  std::shared_ptr<FsdpState> state_;
  std::unordered_set<const nn::Module*> visited_, schedule_shared_;
  std::unordered_map<const TensorImpl*, size_t> index_;  // parameter -> its index in params
  std::unordered_set<const FsdpState*> inner_units_;
};

}  // namespace

void fully_shard(nn::Module& module, const DeviceMesh& mesh, FullyShardOptions options) {
  TS_CHECK(mesh.ndim() == 1,
           "[fully_shard] expects a 1-D mesh (the data-parallel mesh dim), got "
           "a ",
           mesh.ndim(), "-D mesh of shape ", mesh.shape(),
           "; pass one dim of it, e.g. mesh[\"dp\"]");
  TS_CHECK(module.extension(kFsdpKey) == nullptr, "[fully_shard] this ", module.name(),
           " was fully_shard'ed before");
  for (const auto& [name, dtype] :
       {std::pair{"param_dtype", options.param_dtype}, {"reduce_dtype", options.reduce_dtype}}) {
    TS_CHECK_DTYPE(!dtype.has_value() || is_floating_point(*dtype), "[fully_shard] ", name, " ",
                   *dtype, " is not a floating-point dtype; parameters are gathered and their ",
                   "gradients reduced in float64, float32, bfloat16 or float16");
  }
  auto state = std::make_shared<FsdpState>();
  state->group = mesh.get_group(0);
  state->options = options;
  forget_dead_units();
  Collector collector(mesh, state);
  collector.check(module);
  collector.collect(module, "", true);
  module.set_extension(kFsdpKey, state);
  // The unsharded tensors of the call in flight (pre-hook to hook of one call).
  auto in_flight = std::make_shared<std::vector<Tensor>>();
  module.register_forward_pre_hook([state, in_flight](nn::Module&, const Tensor&) {
    *in_flight = unshard(state);
    return Tensor();
  });
  module.register_forward_hook(
      [state, in_flight](nn::Module&, const Tensor&, const Tensor& output) {
        reshard(state, *in_flight, output);
        in_flight->clear();
        return Tensor();
      });
}

}  // namespace tessera
