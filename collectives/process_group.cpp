#include "tessera/collectives/process_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "tessera/collectives/call.h"
#include "tessera/collectives/staged_work.h"
#include "tessera/collectives/wait_timer.h"

namespace tessera::dist {

namespace {

using detail::Call;

Call make_call(CollectiveKind kind, const Tensor& in, const Tensor& out, int peer = 0,
               ReduceOp op = ReduceOp::Sum) {
  Call call;
  call.kind = kind;
  call.in = in;
  call.out = out;
  call.peer = peer;
  call.op = op;
  return call;
}

enum class Layout { kContiguous, kAnyStrides };

void check_tensor(const ProcessGroup& g, DeviceType device, const char* op, const Tensor& t,
                  const char* what, Layout layout = Layout::kContiguous) {
  TS_CHECK(t.defined(), "[", op, "] ", what, " is an undefined tensor");
  TS_CHECK_T(DeviceError, t.device().type() == device, "[", op, "] the ", g.backend_name(),
             " backend works on ", device == DeviceType::CPU ? "CPU" : "CUDA", " tensors, but ",
             what, " is on ", t.device());
  TS_CHECK(layout == Layout::kAnyStrides || t.is_contiguous(), "[", op, "] ", what,
           " must be contiguous, got shape ", t.sizes(), " with strides ", t.strides(),
           "; pass t.contiguous()");
}

// Contiguous stand-ins for the strided tensors of a call, for backends that move only contiguous
// memory: inputs are copied before the call, outputs copied back when it completes.
class Staging {
 public:
  explicit Staging(bool needed) : needed_(needed) {}
  Tensor input(const Tensor& t) const { return needed_ ? t.contiguous() : t; }
  Tensor output(const Tensor& t) {
    if (!needed_ || t.is_contiguous()) return t;
    Tensor stand_in = Tensor::make_empty(t.sizes(), t.dtype(), t.device());
    outputs_.emplace_back(stand_in, t);
    return stand_in;
  }
  WorkPtr finish(WorkPtr work) {
    if (outputs_.empty()) return work;
    return std::make_shared<detail::StagedWork>(std::move(work), std::move(outputs_));
  }

 private:
  bool needed_;
  std::vector<std::pair<Tensor, Tensor>> outputs_;
};

void check_same_dtype(const char* op, const Tensor& a, const char* what_a, const Tensor& b,
                      const char* what_b) {
  TS_CHECK_DTYPE(a.dtype() == b.dtype(), "[", op, "] ", what_a, " and ", what_b,
                 " must have the same dtype, got ", a.dtype(), " and ", b.dtype());
}

void check_rank(const ProcessGroup& g, const char* op, int r, const char* what) {
  TS_CHECK_INDEX(r >= 0 && r < g.size(), "[", op, "] ", what, " ", r, " is not a rank of ",
                 g.describe(), " (valid: 0 to ", g.size() - 1, ")");
}

// Element counts per rank of one side of all_to_all_single: `splits` rows of t, or equal blocks.
std::vector<int64_t> all_to_all_counts(const ProcessGroup& g, const Tensor& t,
                                       const std::vector<int64_t>& splits, const char* what) {
  const char* op = "all_to_all_single";
  const auto n = static_cast<int64_t>(g.size());
  if (splits.empty()) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    TS_CHECK_SHAPE(rows % n == 0, "[", op, "] without ", what,
                   "_splits, dim 0 must divide evenly among ", n, " ranks, got shape ", t.sizes());
    return std::vector<int64_t>(static_cast<size_t>(n), t.numel() / n);
  }
  TS_CHECK_SHAPE(static_cast<int64_t>(splits.size()) == n, "[", op, "] ", what, "_splits needs ", n,
                 " entries (one per rank of ", g.describe(), "), got ", splits.size());
  TS_CHECK_SHAPE(t.dim() >= 1, "[", op, "] ", what, "_splits needs a tensor of at least 1 dim");
  const int64_t total = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  const bool nonnegative =
      std::all_of(splits.begin(), splits.end(), [](int64_t s) { return s >= 0; });
  TS_CHECK_SHAPE(nonnegative && total == t.size(0), "[", op, "] ", what, "_splits ", Shape(splits),
                 " must be non-negative and sum to dim 0 of the ", what, " tensor, shape ",
                 t.sizes());
  const int64_t row = t.size(0) == 0 ? 0 : t.numel() / t.size(0);
  std::vector<int64_t> counts;
  counts.reserve(splits.size());
  for (int64_t s : splits) counts.push_back(s * row);
  return counts;
}

int64_t total_bytes(const std::vector<Tensor>& ts) {
  int64_t b = 0;
  for (const Tensor& t : ts) b += static_cast<int64_t>(t.nbytes());
  return b;
}

// nccl-tests message size (see CollectiveEvent::bytes).
int64_t message_bytes(const Call& c, bool is_root, int group_size) {
  const auto nbytes = [](const Tensor& t) { return static_cast<int64_t>(t.nbytes()); };
  switch (c.kind) {
    case CollectiveKind::AllGatherIntoTensor:
    case CollectiveKind::Recv:
      return nbytes(c.out);
    case CollectiveKind::AllGather:
      return total_bytes(c.list);
    case CollectiveKind::Scatter:
      return is_root ? total_bytes(c.list) : nbytes(c.out) * group_size;
    case CollectiveKind::Gather:
      return is_root ? total_bytes(c.list) : nbytes(c.in) * group_size;
    case CollectiveKind::Barrier:
      return 0;
    default:
      return nbytes(c.in);
  }
}

std::vector<int> sorted_ranks(const ProcessGroup& g, const char* op,
                              const std::vector<int>& ranks) {
  TS_CHECK(!ranks.empty(), "[", op, "] needs at least one rank");
  for (int r : ranks) check_rank(g, op, r, "rank");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  TS_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "[", op,
           "] ranks must be distinct, got ", fmt::format("[{}]", fmt::join(ranks, ", ")));
  return sorted;
}

}  // namespace

ProcessGroup::ProcessGroup(int rank, std::vector<int> world_ranks,
                           std::chrono::milliseconds default_timeout)
    : rank_(rank), world_ranks_(std::move(world_ranks)), default_timeout_(default_timeout) {
  TS_INTERNAL_ASSERT(rank_ >= 0 && rank_ < size(), "rank ", rank_, " of ", size());
}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::describe() const {
  // Every rank formats this when its group is made: listing thousands of ranks in full would make
  // setup quadratic in the group size (and the messages unreadable), so long lists are cut.
  constexpr size_t kListed = 16;
  const size_t n = world_ranks_.size();
  if (n <= kListed)
    return fmt::format("{} group [{}]", backend_name(), fmt::join(world_ranks_, ", "));
  const auto head = std::vector<int>(world_ranks_.begin(), world_ranks_.begin() + kListed / 2);
  const auto tail = std::vector<int>(world_ranks_.end() - kListed / 4, world_ranks_.end());
  return fmt::format("{} group of {} ranks [{}, ..., {}]", backend_name(), n, fmt::join(head, ", "),
                     fmt::join(tail, ", "));
}

void ProcessGroup::set_default_timeout(std::chrono::milliseconds timeout) {
  TS_CHECK(timeout.count() > 0, "[set_default_timeout] the timeout must be positive, got ",
           timeout.count(), " ms");
  default_timeout_ = timeout;
}

WorkPtr ProcessGroup::issue(Call&& call, const CollectiveOptions& options) {
  call.timeout = options.timeout.value_or(default_timeout_);
  TS_CHECK(call.timeout.count() > 0, "[", call.name(), "] the timeout must be positive, got ",
           call.timeout.count(), " ms");
  call.async_op = options.async_op;
  if (const detail::CallContext* context = detail::current_call_context()) call.context = *context;
  CollectiveEvent event;
  event.kind = call.kind;
  event.group = this;
  event.bytes = message_bytes(call, call.peer == rank_, size());
  if (call.kind != CollectiveKind::Barrier) event.dtype = call.dtype();
  if (call.kind == CollectiveKind::AllReduce || call.kind == CollectiveKind::ReduceScatterTensor) {
    event.op = call.op;
  }
  event.async_op = call.async_op;
  detail::notify_observers(event);
  if (!detail::timing_waits()) return run(std::move(call));
  // The time in the call is time this rank computes nothing (a synchronous call blocks until the
  // collective is done); an asynchronous one's waits are counted where they are made.
  const bool async = call.async_op;
  const auto t0 = std::chrono::steady_clock::now();
  WorkPtr work = run(std::move(call));
  detail::add_wait_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return async ? detail::timed_work(std::move(work)) : work;
}

WorkPtr ProcessGroup::all_reduce(const Tensor& t, ReduceOp op, const CollectiveOptions& options) {
  const char* name = "all_reduce";
  check_tensor(*this, device_type(), name, t, "the tensor");
  check_reduce_op(name, op, t.dtype());
  return issue(make_call(CollectiveKind::AllReduce, t, t, 0, op), options);
}

WorkPtr ProcessGroup::all_reduce(const Tensor& t, const CollectiveOptions& options) {
  return all_reduce(t, ReduceOp::Sum, options);
}

WorkPtr ProcessGroup::all_reduce_into(const Tensor& out, const Tensor& in, ReduceOp op,
                                      const CollectiveOptions& options) {
  const char* name = "all_reduce";
  check_tensor(*this, device_type(), name, out, "out");
  check_tensor(*this, device_type(), name, in, "in");
  check_same_dtype(name, out, "out", in, "in");
  check_reduce_op(name, op, in.dtype());
  TS_CHECK_SHAPE(out.numel() == in.numel(), "[", name, "] out and in must have the same number of ",
                 "elements, got shapes ", out.sizes(), " and ", in.sizes());
  return issue(make_call(CollectiveKind::AllReduce, in, out, 0, op), options);
}

WorkPtr ProcessGroup::all_gather_into_tensor(const Tensor& out, const Tensor& in,
                                             const CollectiveOptions& options) {
  const char* name = "all_gather_into_tensor";
  check_tensor(*this, device_type(), name, out, "out", Layout::kAnyStrides);
  check_tensor(*this, device_type(), name, in, "in", Layout::kAnyStrides);
  check_same_dtype(name, out, "out", in, "in");
  TS_CHECK_SHAPE(out.numel() == in.numel() * size(), "[", name, "] out must hold size() * ",
                 "in.numel() = ", size(), " * ", in.numel(), " elements, got shape ", out.sizes());
  Staging staging(!moves_strided_tensors());
  return staging.finish(
      issue(make_call(CollectiveKind::AllGatherIntoTensor, staging.input(in), staging.output(out)),
            options));
}

WorkPtr ProcessGroup::all_gather(const std::vector<Tensor>& outs, const Tensor& in,
                                 const CollectiveOptions& options) {
  const char* name = "all_gather";
  check_tensor(*this, device_type(), name, in, "in", Layout::kAnyStrides);
  TS_CHECK_SHAPE(static_cast<int>(outs.size()) == size(), "[", name, "] needs one output per rank",
                 " (", size(), "), got ", outs.size());
  for (const Tensor& o : outs) {
    check_tensor(*this, device_type(), name, o, "each output", Layout::kAnyStrides);
    check_same_dtype(name, o, "each output", in, "in");
  }
  TS_CHECK_SHAPE(outs[static_cast<size_t>(rank())].numel() == in.numel(), "[", name, "] outs[",
                 rank(), "] receives this rank's input and needs its ", in.numel(),
                 " elements, got shape ", outs[static_cast<size_t>(rank())].sizes());
  Staging staging(!moves_strided_tensors());
  Call call = make_call(CollectiveKind::AllGather, staging.input(in), {});
  for (const Tensor& o : outs) call.list.push_back(staging.output(o));
  return staging.finish(issue(std::move(call), options));
}

WorkPtr ProcessGroup::reduce_scatter_tensor(const Tensor& out, const Tensor& in, ReduceOp op,
                                            const CollectiveOptions& options) {
  const char* name = "reduce_scatter_tensor";
  check_tensor(*this, device_type(), name, out, "out", Layout::kAnyStrides);
  check_tensor(*this, device_type(), name, in, "in", Layout::kAnyStrides);
  check_same_dtype(name, out, "out", in, "in");
  check_reduce_op(name, op, in.dtype());
  TS_CHECK_SHAPE(in.numel() == out.numel() * size(), "[", name, "] in must hold size() * ",
                 "out.numel() = ", size(), " * ", out.numel(), " elements, got shape ", in.sizes());
  Staging staging(!moves_strided_tensors());
  return staging.finish(issue(
      make_call(CollectiveKind::ReduceScatterTensor, staging.input(in), staging.output(out), 0, op),
      options));
}

WorkPtr ProcessGroup::reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                            const CollectiveOptions& options) {
  return reduce_scatter_tensor(out, in, ReduceOp::Sum, options);
}

WorkPtr ProcessGroup::all_to_all_single(const Tensor& out, const Tensor& in,
                                        const std::vector<int64_t>& out_splits,
                                        const std::vector<int64_t>& in_splits,
                                        const CollectiveOptions& options) {
  const char* name = "all_to_all_single";
  check_tensor(*this, device_type(), name, out, "out", Layout::kAnyStrides);
  check_tensor(*this, device_type(), name, in, "in", Layout::kAnyStrides);
  check_same_dtype(name, out, "out", in, "in");
  if (!in_splits.empty() || !out_splits.empty()) {
    const bool rows_match = in.dim() >= 1 && out.dim() >= 1 &&
                            Shape(in.sizes().begin() + 1, in.sizes().end()) ==
                                Shape(out.sizes().begin() + 1, out.sizes().end());
    TS_CHECK_SHAPE(rows_match, "[", name, "] in and out must agree on all dims but the first, got ",
                   in.sizes(), " and ", out.sizes());
  }
  Staging staging(!moves_strided_tensors());
  Call call = make_call(CollectiveKind::AllToAllSingle, staging.input(in), staging.output(out));
  call.in_counts = all_to_all_counts(*this, in, in_splits, "in");
  call.out_counts = all_to_all_counts(*this, out, out_splits, "out");
  call.equal_splits = in_splits.empty() && out_splits.empty();
  return staging.finish(issue(std::move(call), options));
}

WorkPtr ProcessGroup::broadcast(const Tensor& t, int root, const CollectiveOptions& options) {
  const char* name = "broadcast";
  check_tensor(*this, device_type(), name, t, "the tensor");
  check_rank(*this, name, root, "root");
  return issue(make_call(CollectiveKind::Broadcast, t, t, root), options);
}

WorkPtr ProcessGroup::scatter(const Tensor& out, const std::vector<Tensor>& ins, int root,
                              const CollectiveOptions& options) {
  const char* name = "scatter";
  check_tensor(*this, device_type(), name, out, "out");
  check_rank(*this, name, root, "root");
  Call call = make_call(CollectiveKind::Scatter, {}, out, root);
  if (root == rank()) {
    TS_CHECK_SHAPE(static_cast<int>(ins.size()) == size(), "[", name,
                   "] the root needs one input per rank (", size(), "), got ", ins.size());
    for (const Tensor& t : ins) {
      check_tensor(*this, device_type(), name, t, "each input");
      check_same_dtype(name, t, "each input", out, "out");
    }
    call.list = ins;
  }
  return issue(std::move(call), options);
}

WorkPtr ProcessGroup::gather(const Tensor& in, const std::vector<Tensor>& outs, int root,
                             const CollectiveOptions& options) {
  const char* name = "gather";
  check_tensor(*this, device_type(), name, in, "in");
  check_rank(*this, name, root, "root");
  Call call = make_call(CollectiveKind::Gather, in, {}, root);
  if (root == rank()) {
    TS_CHECK_SHAPE(static_cast<int>(outs.size()) == size(), "[", name,
                   "] the root needs one output per rank (", size(), "), got ", outs.size());
    for (const Tensor& t : outs) {
      check_tensor(*this, device_type(), name, t, "each output");
      check_same_dtype(name, t, "each output", in, "in");
    }
    call.list = outs;
  }
  return issue(std::move(call), options);
}

WorkPtr ProcessGroup::send(const Tensor& t, int dst, const CollectiveOptions& options) {
  const char* name = "send";
  check_tensor(*this, device_type(), name, t, "the tensor");
  check_rank(*this, name, dst, "dst");
  TS_CHECK(dst != rank(), "[", name, "] rank ", rank(), " cannot send to itself");
  return issue(make_call(CollectiveKind::Send, t, {}, dst), options);
}

WorkPtr ProcessGroup::recv(const Tensor& t, int src, const CollectiveOptions& options) {
  const char* name = "recv";
  check_tensor(*this, device_type(), name, t, "the tensor");
  check_rank(*this, name, src, "src");
  TS_CHECK(src != rank(), "[", name, "] rank ", rank(), " cannot receive from itself");
  return issue(make_call(CollectiveKind::Recv, {}, t, src), options);
}

WorkPtr ProcessGroup::barrier(const CollectiveOptions& options) {
  return issue(make_call(CollectiveKind::Barrier, {}, {}), options);
}

ProcessGroupPtr ProcessGroup::split(const std::vector<int>& ranks) {
  return split_group("split", sorted_ranks(*this, "split", ranks), false);
}

ProcessGroupPtr ProcessGroup::new_group(const std::vector<int>& ranks) {
  return split_group("new_group", sorted_ranks(*this, "new_group", ranks), true);
}

}  // namespace tessera::dist
