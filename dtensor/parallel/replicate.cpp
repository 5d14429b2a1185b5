#include "tessera/dtensor/parallel/replicate.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/autograd/engine.h"
#include "tessera/collectives/process_group.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/parallel/module_keys.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

// Note [Gradient buckets]
// As DDP's reducer: a hook on each parameter copies its gradient-to-be (.grad() so far plus the
// incoming gradient, which AccumulateGrad then adds) into the parameter's slot of its bucket's
// flat buffer. Copying the sum, not the incoming gradient alone, makes the average cover what
// NoSyncGuard let accumulate, and keeps a second synced backward before the optimizer step right
// (the average of an already averaged .grad() is itself). When a bucket's last slot is in and
// every earlier bucket has been issued, its all_reduce (avg) is issued asynchronously: the group's
// progress thread reduces it while this rank's backward computes the next buckets' gradients.
// Buckets are issued strictly in bucket order, never in the order they happen to fill, because
// ranks match collectives on a group by issue order and their backward passes may finish
// parameters in different orders. The first hook of a pass queues the pass's end
// (autograd::queue_callback, after every node ran): it fills the slots of parameters that got no
// gradient, issues what is left, waits for every bucket in order and copies each slot back into
// .grad(), so that backward returns with averaged gradients. The buffers are reused every step,
// hence the copies back rather than views of them.
//
// The pass's end is an object owned by the queued callback: its destructor runs whether the pass
// finished or failed (a failing pass drops its callbacks), waits for what is in flight (the
// buffers must not be written while a collective reads them) and resets the pass, so that the
// next backward starts clean.

namespace tessera {

namespace detail {

struct ReplicateState {
  struct Slot {
    std::string name;  // as named_parameters prints it, for errors
    Tensor param;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer, in elements
    int64_t numel = 0;
    bool ready = false;  // in its bucket in the current pass
  };
  struct Bucket {
    Tensor flat;
    std::vector<size_t> slots;
    size_t pending = 0;  // slots not ready in the current pass
    dist::WorkPtr work;  // in flight or waited in the current pass
  };

  dist::ProcessGroupPtr group;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  size_t next_to_issue = 0;
  bool in_pass = false;
  bool sync = true;  // false while a NoSyncGuard lives
};

}  // namespace detail

namespace {

using detail::ReplicateState;

using detail::kFullyShardKey;
using detail::kReplicateKey;

// Which replicate() manages each parameter, per rank thread (the threads backend runs ranks as
// threads of one process): a nested replicate() is found from either side. A live state holds its
// parameters, so a live entry's TensorImpl is never reused.
std::unordered_map<const TensorImpl*, std::weak_ptr<ReplicateState>>& managed_params() {
  thread_local std::unordered_map<const TensorImpl*, std::weak_ptr<ReplicateState>> registry;
  return registry;
}

Tensor slot_view(const ReplicateState& s, const ReplicateState::Slot& slot) {
  return s.buckets[slot.bucket].flat.narrow(0, slot.offset, slot.numel).view(slot.param.sizes());
}

void issue_ready_buckets(ReplicateState& s) {
  while (s.next_to_issue < s.buckets.size() && s.buckets[s.next_to_issue].pending == 0) {
    ReplicateState::Bucket& b = s.buckets[s.next_to_issue++];
    b.work = s.group->all_reduce(b.flat, dist::ReduceOp::Avg, {.async_op = true});
  }
}

// Copies the slot's gradient-to-be (`incoming` plus .grad() so far, either may be undefined) into
// its bucket and issues what became ready.
void fill_slot(ReplicateState& s, size_t i, const Tensor& incoming) {
  ReplicateState::Slot& slot = s.slots[i];
  NoGradGuard no_grad;
  Tensor view = slot_view(s, slot);
  const Tensor so_far = slot.param.grad();
  if (incoming.defined()) {
    view.copy_(incoming);
    if (so_far.defined()) view += so_far;
  } else if (so_far.defined()) {
    view.copy_(so_far);
  } else {
    view.zero_();
  }
  slot.ready = true;
  --s.buckets[slot.bucket].pending;
  issue_ready_buckets(s);
}

// Waits for what is still in flight and makes the state ready for the next pass. Never throws:
// it runs from a destructor, also while a failed pass unwinds (whose own error is the one to see).
void reset_pass(ReplicateState& s) noexcept {
  for (ReplicateState::Bucket& b : s.buckets) {
    if (b.work != nullptr) {
      try {
        b.work->wait();
      } catch (...) {  // the pass failed already, or finish() rethrew this error
      }
      b.work.reset();
    }
    b.pending = b.slots.size();
  }
  for (ReplicateState::Slot& slot : s.slots) slot.ready = false;
  s.next_to_issue = 0;
  s.in_pass = false;
}

// The end of one backward pass (See Note [Gradient buckets]).
class PassEnd {
 public:
  explicit PassEnd(std::shared_ptr<ReplicateState> state) : state_(std::move(state)) {}
  ~PassEnd() { reset_pass(*state_); }
  PassEnd(const PassEnd&) = delete;
  PassEnd& operator=(const PassEnd&) = delete;

  void finish() const {
    ReplicateState& s = *state_;
    for (size_t i = 0; i < s.slots.size(); ++i) {
      if (!s.slots[i].ready) fill_slot(s, i, Tensor());
    }
    NoGradGuard no_grad;
    for (ReplicateState::Bucket& b : s.buckets) {
      b.work->wait();
      b.work.reset();
      for (const size_t i : b.slots) {
        const ReplicateState::Slot& slot = s.slots[i];
        // Undefined: no gradient here in this pass or before (see replicate.h).
        const Tensor grad = slot.param.grad();
        if (!grad.defined()) continue;
        if (grad.requires_grad()) {
          slot.param.set_grad(slot_view(s, slot).clone());
        } else {
          slot.param.mutable_grad().copy_(slot_view(s, slot));
        }
      }
    }
  }

 private:
  std::shared_ptr<ReplicateState> state_;
};

void check_layout(const ReplicateState& s, const ReplicateState::Slot& slot) {
  const Tensor& p = slot.param;
  const Tensor& flat = s.buckets[slot.bucket].flat;
  TS_CHECK(!p.is_distributed() && p.dtype() == flat.dtype() && p.device() == flat.device() &&
               p.numel() == slot.numel,
           "[replicate] parameter '", slot.name, "' is now ",
           p.is_distributed() ? "a DTensor" : "a plain tensor", " of ", p.numel(), " ", p.dtype(),
           " elements on ", p.device(), ", but replicate() laid its gradient out as ", slot.numel,
           " ", flat.dtype(), " elements on ", flat.device(),
           "; cast, move or shard the module before replicate(), not after");
}

void on_gradient(const std::shared_ptr<ReplicateState>& s, size_t i, const Tensor& grad) {
  if (!s->in_pass) {
    if (!s->sync) return;
    autograd::queue_callback([end = std::make_shared<PassEnd>(s)] { end->finish(); });
    s->in_pass = true;
  }
  const ReplicateState::Slot& slot = s->slots[i];
  TS_CHECK(!slot.ready, "[replicate] parameter '", slot.name,
           "' got gradients from two backward passes at once (one nested in a Function's "
           "backward, as reentrant checkpointing runs, and the pass around it); replicate "
           "reduces a parameter's gradient once per pass");
  check_layout(*s, slot);
  fill_slot(*s, i, grad);
}

void check_module(nn::Module& module, const DeviceMesh& mesh, const ReplicateOptions& options) {
  TS_CHECK(mesh.ndim() == 1, "[replicate] expects a 1-D mesh (the data-parallel mesh dim), got a ",
           mesh.ndim(), "-D mesh of shape ", mesh.shape(), " (", mesh.to_string(),
           "); pass one dim of it, e.g. mesh[\"dp\"]");
  TS_CHECK(options.bucket_cap_mb > 0, "[replicate] bucket_cap_mb must be > 0 (MiB per gradient ",
           "bucket, default 25), got ", options.bucket_cap_mb);
  TS_CHECK(module.extension(kReplicateKey) == nullptr, "[replicate] this ", module.name(),
           " was replicated before; replicate a module once");
  for (const auto& [path, m] : module.named_modules()) {
    TS_CHECK(m->extension(kFullyShardKey) == nullptr, "[replicate] ",
             path.empty() ? "this " + m->name() : "submodule '" + path + "' (" + m->name() + ")",
             " is fully_shard'ed; a module is either replicated (replicate) or sharded "
             "(fully_shard), not both");
  }
  for (const auto& [name, p] : module.named_parameters()) {
    TS_CHECK(!p.is_distributed(), "[replicate] parameter '", name, "' is a DTensor on ",
             DTensor(p).device_mesh().to_string(),
             "; replicate takes plain parameters (replicated data parallel), not ones "
             "distribute_module, parallelize_module or fully_shard made DTensors");
    const auto known = managed_params().find(p.unsafe_impl());
    TS_CHECK(known == managed_params().end() || known->second.expired(), "[replicate] parameter '",
             name, "' of this ", module.name(),
             " is managed by replicate() of another module (a replicated parent or child); "
             "replicate the root module once");
  }
}

// The buckets (See Note [Gradient buckets]): reverse registration order, a new bucket when the
// dtype or device changes or the cap would be exceeded.
void lay_out(ReplicateState& s, nn::Module& module, double cap_bytes) {
  const auto params = module.named_parameters();
  int64_t bucket_bytes = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& p = it->second;
    if (!p.requires_grad()) continue;
    const int64_t bytes = p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    const ReplicateState::Slot* last = s.slots.empty() ? nullptr : &s.slots.back();
    if (last == nullptr || last->param.dtype() != p.dtype() || last->param.device() != p.device() ||
        static_cast<double>(bucket_bytes + bytes) > cap_bytes) {
      s.buckets.emplace_back();
      bucket_bytes = 0;
    }
    ReplicateState::Bucket& b = s.buckets.back();
    const int64_t offset = b.slots.empty() ? 0 : last->offset + last->numel;
    b.slots.push_back(s.slots.size());
    s.slots.push_back({it->first, p, s.buckets.size() - 1, offset, p.numel()});
    bucket_bytes += bytes;
  }
  for (ReplicateState::Bucket& b : s.buckets) {
    const ReplicateState::Slot& last = s.slots[b.slots.back()];
    b.flat = zeros({last.offset + last.numel},
                   TensorOptions(last.param.dtype()).device(last.param.device()));
    b.pending = b.slots.size();
  }
}

// DDP's starting point: every rank holds rank 0's values.
void broadcast_from_first(dist::ProcessGroup& group, const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor c = t.contiguous();
  group.broadcast(c, 0)->wait();
  if (c.unsafe_impl() != t.unsafe_impl()) t.detach().copy_(c);
}

}  // namespace

void replicate(nn::Module& module, const DeviceMesh& mesh, ReplicateOptions options) {
  std::erase_if(managed_params(), [](const auto& entry) { return entry.second.expired(); });
  check_module(module, mesh, options);
  auto state = std::make_shared<ReplicateState>();
  state->group = mesh.get_group(0);
  for (const Tensor& p : module.parameters()) broadcast_from_first(*state->group, p);
  for (const Tensor& b : module.buffers()) broadcast_from_first(*state->group, b);
  lay_out(*state, module, options.bucket_cap_mb * 1024 * 1024);
  for (size_t i = 0; i < state->slots.size(); ++i) {
    const Tensor& p = state->slots[i].param;
    managed_params()[p.unsafe_impl()] = state;
    // Weak: the parameter owns its hooks and the state owns the parameter.
    p.register_hook([weak = std::weak_ptr<ReplicateState>(state), i](const Tensor& grad) {
      if (const std::shared_ptr<ReplicateState> s = weak.lock()) on_gradient(s, i, grad);
      return Tensor();
    });
  }
  module.set_extension(kReplicateKey, state);
}

NoSyncGuard::NoSyncGuard(nn::Module& replicated)
    : state_(std::static_pointer_cast<detail::ReplicateState>(replicated.extension(kReplicateKey))),
      previous_(true) {
  TS_CHECK(state_ != nullptr, "[NoSyncGuard] this ", replicated.name(),
           " is not replicated; pass the module replicate() ran on");
  previous_ = state_->sync;
  state_->sync = false;
}

NoSyncGuard::~NoSyncGuard() { state_->sync = previous_; }

}  // namespace tessera
