#include "tessera/collectives/threads/process_group_threads.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "tessera/collectives/local_kernels.h"
#include "tessera/collectives/threads/strided_runs.h"

namespace tessera::dist::detail {

namespace {

class P2PWork final : public Work {
 public:
  P2PWork(std::shared_ptr<GroupState> state, std::shared_ptr<GroupState::P2P> half,
          std::string where)
      : state_(std::move(state)), half_(std::move(half)), where_(std::move(where)) {}
  void wait() override { state_->wait(*half_, where_); }
  bool is_completed() const override { return state_->done(*half_); }

 private:
  std::shared_ptr<GroupState> state_;
  std::shared_ptr<GroupState::P2P> half_;
  std::string where_;
};

// Note [One thread per rank and group]
// A rank's collectives on a group are matched with its peers' in the order the rank issues them,
// and its sequence and barrier counters are plain members: two threads of one rank issuing on the
// same group at once (a user's std::thread beside the rank thread) would pair calls arbitrarily
// and share a slot. Serializing them would only hide the wrong pairing, so the second thread to
// enter raises, and the first goes on. A thread issuing after the other returned is one rank's
// program in issue order, as on one thread.
class ExclusiveUse {
 public:
  ExclusiveUse(std::atomic<bool>& busy, const char* op, int rank, const std::string& where)
      : busy_(busy) {
    if (busy_.exchange(true, std::memory_order_acquire)) {
      throw Error(fmt::format(
          "[{}] rank {} of {} issued a collective from two threads at once: a rank's collectives "
          "on a group are matched with its peers' in issue order, so issue them from one thread "
          "(async_op for concurrency, or a group per thread made with new_group)",
          op, rank, where));
    }
  }
  ~ExclusiveUse() { busy_.store(false, std::memory_order_release); }
  ExclusiveUse(const ExclusiveUse&) = delete;
  ExclusiveUse& operator=(const ExclusiveUse&) = delete;

 private:
  std::atomic<bool>& busy_;
};

// A member's part in the data phase of a collective, ended once (Note [Leaving a collective
// early]).
class Reading {
 public:
  explicit Reading(GroupState& state) : state_(state) {}
  ~Reading() { end(); }
  void end() {
    if (!ended_) state_.end_reading();
    ended_ = true;
  }
  Reading(const Reading&) = delete;
  Reading& operator=(const Reading&) = delete;

 private:
  GroupState& state_;
  bool ended_ = false;
};

// Below this, every rank reduces the whole tensor into scratch (two barriers); above it, each
// rank reduces one chunk and gathers the others' (three barriers, O(size) bytes per rank).
constexpr size_t kSmallAllReduceBytes = 32 * 1024;

}  // namespace

ProcessGroupThreads::ProcessGroupThreads(std::shared_ptr<GroupState> state, int rank,
                                         std::chrono::milliseconds default_timeout)
    : ProcessGroup(rank, state->world_ranks(), default_timeout),
      state_(std::move(state)),
      progress_(std::make_shared<ProgressThread>()) {
  where_ = describe();
  state_->world()->track(world_ranks()[static_cast<size_t>(rank)], progress_);
}

ProcessGroupThreads::~ProcessGroupThreads() { progress_->drain(); }

WorkPtr ProcessGroupThreads::run(Call&& call) {
  // Point to point does not queue behind collectives: posting never blocks.
  if (call.kind == CollectiveKind::Send || call.kind == CollectiveKind::Recv) {
    return send_recv(call);
  }
  if (!call.async_op) return progress_->submit([&] { execute(call); }, false);
  auto owned = std::make_shared<Call>(std::move(call));
  return progress_->submit([this, owned] { execute(*owned); }, true);
}

void ProcessGroupThreads::phase(const char* op, Clock::time_point deadline,
                                std::chrono::milliseconds timeout, bool opens_data_phase) {
  state_->arrive_and_wait(rank(), phase_++, deadline, op, timeout, where_, opens_data_phase);
}

void ProcessGroupThreads::execute(const Call& call) {
  const ExclusiveUse exclusive(busy_, call.name(), rank(), where_);
  const Clock::time_point deadline = Clock::now() + call.timeout;
  const uint64_t seq = seq_++;
  Slot& mine = state_->slot(seq, rank());
  mine.call = &call;
  mine.sig = signature_of(call);
  phase(call.name(), deadline, call.timeout, /*opens_data_phase=*/true);
  Reading reading(*state_);
  std::vector<CallSignature> sigs;
  sigs.reserve(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q) sigs.push_back(state_->slot(seq, q).sig);
  // A disagreement raises on every member alike, before any reads a peer's data; its message
  // reads the peers' context descriptions, which their Calls own, so none leaves before all are
  // done (Note [Leaving a collective early]).
  try {
    check_agreement(mine.sig, sigs, *this);
  } catch (...) {
    reading.end();
    state_->wait_for_readers();
    throw;
  }
  if (call.kind == CollectiveKind::Barrier) return;
  try {
    move_data(call, seq, deadline);
  } catch (const std::exception& e) {
    reading.end();
    // Peers would wait for this rank's next barrier: fail the group for them too.
    if (!dynamic_cast<const CommError*>(&e)) {
      state_->abort(fmt::format("rank {} failed inside {}: {}", rank(), call.name(), e.what()));
    }
    // Peers may still be reading this rank's call (Note [Leaving a collective early]).
    state_->wait_for_readers();
    throw;
  }
}

void ProcessGroupThreads::move_data(const Call& call, uint64_t seq, Clock::time_point deadline) {
  const int r = rank();
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      return all_reduce(call, seq, deadline);
    case CollectiveKind::AllGatherIntoTensor:
      all_gather_into_tensor(call, seq);
      break;
    case CollectiveKind::AllGather: {
      size_t transfer = 0;
      for (const Tensor& out : call.list) transfer += out.nbytes();
      for (int q = 0; q < size(); ++q) {
        const Tensor& out = call.list[static_cast<size_t>(q)];
        copy_logical(out, 0, peer_call(seq, q).in, 0, out.numel(), transfer);
      }
      break;
    }
    case CollectiveKind::ReduceScatterTensor:
      reduce_scatter_tensor(call, seq);
      break;
    case CollectiveKind::AllToAllSingle:
      all_to_all(call, seq);
      break;
    case CollectiveKind::Broadcast:
      copy_bytes(bytes_of(call.out), bytes_of(peer_call(seq, call.peer).in), call.out.nbytes());
      break;
    case CollectiveKind::Scatter: {
      const Tensor& src = peer_call(seq, call.peer).list[static_cast<size_t>(r)];
      copy_bytes(bytes_of(call.out), bytes_of(src), src.nbytes());
      break;
    }
    case CollectiveKind::Gather:
      if (r == call.peer) {
        for (int q = 0; q < size(); ++q) {
          const Tensor& out = call.list[static_cast<size_t>(q)];
          copy_bytes(bytes_of(out), bytes_of(peer_call(seq, q).in), out.nbytes());
        }
      }
      break;
    default:
      TS_INTERNAL_ASSERT(false, "no data phase for ", call.name());
  }
  phase(call.name(), deadline, call.timeout);  // peers are done reading this rank's tensors
}

void ProcessGroupThreads::all_reduce(const Call& call, uint64_t seq, Clock::time_point deadline) {
  const int n = size();
  const int r = rank();
  const DType dtype = call.dtype();
  const size_t es = element_size(dtype);
  const int64_t count = call.in.numel();
  std::vector<const void*> ins(static_cast<size_t>(n));
  if (call.in.nbytes() <= kSmallAllReduceBytes) {
    scratch_.resize(call.in.nbytes());
    for (int q = 0; q < n; ++q) ins[static_cast<size_t>(q)] = bytes_of(peer_call(seq, q).in);
    reduce_n(dtype, call.op, scratch_.data(), ins.data(), n, count);
    phase(call.name(), deadline, call.timeout);  // every peer has read this rank's input
    copy_bytes(bytes_of(call.out), scratch_.data(), scratch_.size());
    return;
  }
  // Reduce-scatter in place (rank r owns chunk r of every tensor), then all-gather the chunks.
  const int64_t begin = chunk_begin(count, n, r, es);
  const int64_t end = chunk_begin(count, n, r + 1, es);
  for (int q = 0; q < n; ++q) {
    ins[static_cast<size_t>(q)] = bytes_of(peer_call(seq, q).in) + begin * static_cast<int64_t>(es);
  }
  reduce_n(dtype, call.op, bytes_of(call.out) + begin * static_cast<int64_t>(es), ins.data(), n,
           end - begin);
  phase(call.name(), deadline, call.timeout);
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    const int64_t b = chunk_begin(count, n, q, es);
    const int64_t e = chunk_begin(count, n, q + 1, es);
    const int64_t offset = b * static_cast<int64_t>(es);
    copy_bytes(bytes_of(call.out) + offset, bytes_of(peer_call(seq, q).out) + offset,
               static_cast<size_t>((e - b) * static_cast<int64_t>(es)), call.out.nbytes());
  }
  phase(call.name(), deadline, call.timeout);
}

void ProcessGroupThreads::all_gather_into_tensor(const Call& call, uint64_t seq) {
  const int64_t count = call.in.numel();
  const size_t transfer = call.out.nbytes();
  bool contiguous = call.out.is_contiguous();
  for (int q = 0; q < size(); ++q) contiguous = contiguous && peer_call(seq, q).in.is_contiguous();
  if (contiguous) {
    for (int q = 0; q < size(); ++q) {
      copy_logical(call.out, q * count, peer_call(seq, q).in, 0, count, transfer);
    }
    return;
  }
  // Blocks that interleave in the output (a gather along an inner dim), or inputs in short runs
  // (the chunk of a shard along an inner dim): the runs of all blocks move together, see Note
  // [Interleaved blocks].
  std::vector<LogicalCopy> blocks;
  blocks.reserve(static_cast<size_t>(size()));
  for (int q = 0; q < size(); ++q) {
    blocks.emplace_back(call.out, q * count, peer_call(seq, q).in, 0, transfer);
  }
  copy_interleaved(blocks, std::vector<int64_t>(static_cast<size_t>(size()), count), transfer);
  store_fence();
}

void ProcessGroupThreads::reduce_scatter_tensor(const Call& call, uint64_t seq) {
  const int n = size();
  const int64_t count = call.out.numel();
  std::vector<const Tensor*> ins(static_cast<size_t>(n));
  bool contiguous = true;
  for (int q = 0; q < n; ++q) {
    ins[static_cast<size_t>(q)] = &peer_call(seq, q).in;
    contiguous = contiguous && ins[static_cast<size_t>(q)]->is_contiguous();
  }
  std::vector<int64_t> begins(static_cast<size_t>(n), rank() * count);
  if (contiguous) {
    reduce_logical(call.op, call.out, 0, ins, begins, count);
    return;
  }
  // The blocks interleave in the inputs (a scatter along an inner dim). Reducing only its own
  // block, a rank would read every input in short strided runs; instead each rank takes one slice
  // of every block and reduces it in the inputs' memory order, the current run of every block in
  // turn, writing each result into the peer that owns it (Note [Interleaved blocks]). The data
  // phase that follows keeps every peer waiting until all its output is written.
  const size_t es = call.out.element_size();
  const int64_t begin = chunk_begin(count, n, rank(), es);
  const int64_t end = chunk_begin(count, n, rank() + 1, es);
  std::vector<LogicalReduce> blocks;
  blocks.reserve(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    std::fill(begins.begin(), begins.end(), q * count + begin);
    blocks.emplace_back(call.op, peer_call(seq, q).out, begin, ins, begins);
  }
  if (end > begin) reduce_interleaved(blocks, end - begin);
}

void ProcessGroupThreads::all_to_all(const Call& call, uint64_t seq) {
  const int n = size();
  const int r = rank();
  const auto offset_of = [](const std::vector<int64_t>& counts, int block) {
    int64_t offset = 0;
    for (int j = 0; j < block; ++j) offset += counts[static_cast<size_t>(j)];
    return offset;
  };
  // Every rank decides alike from all the calls: each block is written by exactly one rank.
  bool outputs_contiguous = true;
  bool inputs_contiguous = true;
  for (int q = 0; q < n; ++q) {
    outputs_contiguous = outputs_contiguous && peer_call(seq, q).out.is_contiguous();
    inputs_contiguous = inputs_contiguous && peer_call(seq, q).in.is_contiguous();
  }
  // Blocks that interleave in the inputs (a split along an inner dim) are pushed: each rank reads
  // its own input in memory order and writes the blocks into the peers' outputs;
  // otherwise each rank pulls its blocks from the peers (Note [Interleaved blocks]). The data
  // phase that follows keeps every peer waiting until all its output is written.
  const bool push = outputs_contiguous && !inputs_contiguous;
  std::vector<LogicalCopy> blocks;
  std::vector<int64_t> counts;
  blocks.reserve(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    const Call& peer = peer_call(seq, q);
    if (push) {
      blocks.emplace_back(peer.out, offset_of(peer.out_counts, r), call.in,
                          offset_of(call.in_counts, q), peer.out.nbytes());
      counts.push_back(call.in_counts[static_cast<size_t>(q)]);
    } else {
      blocks.emplace_back(call.out, offset_of(call.out_counts, q), peer.in,
                          offset_of(peer.in_counts, r), call.out.nbytes());
      counts.push_back(call.out_counts[static_cast<size_t>(q)]);
    }
  }
  if (push || !call.out.is_contiguous()) {
    copy_interleaved(blocks, counts, push ? call.in.nbytes() : call.out.nbytes());
  } else {
    for (size_t q = 0; q < blocks.size(); ++q) blocks[q].run(counts[q]);
  }
  store_fence();
}

WorkPtr ProcessGroupThreads::send_recv(const Call& call) {
  auto half = std::make_shared<GroupState::P2P>();
  half->sending = call.kind == CollectiveKind::Send;
  half->src = half->sending ? rank() : call.peer;
  half->dst = half->sending ? call.peer : rank();
  half->tensor = half->sending ? call.in : call.out;
  half->sig = signature_of(call);
  half->op = call.name();
  half->deadline = Clock::now() + call.timeout;
  half->timeout = call.timeout;
  state_->post(half, where_);
  if (!call.async_op) {
    state_->wait(*half, where_);
    return completed_work();
  }
  return std::make_shared<P2PWork>(state_, std::move(half), where_);
}

ProcessGroupPtr ProcessGroupThreads::split_group(const char* op_name, const std::vector<int>& mine,
                                                 bool same_everywhere) {
  ProcessGroupPtr result;
  progress_->submit(
      [&] {
        const ExclusiveUse exclusive(busy_, op_name, rank(), where_);
        const Clock::time_point deadline = Clock::now() + default_timeout();
        const uint64_t seq = seq_++;
        Slot& slot = state_->slot(seq, rank());
        slot.call = nullptr;
        slot.sig = CallSignature();
        slot.sig.kind = CollectiveKind::Split;
        slot.split_ranks = mine;
        phase(op_name, deadline, default_timeout(), /*opens_data_phase=*/true);
        // Peers' slots live in the shared state, not on their stacks: no need to wait for them.
        const Reading reading(*state_);
        std::vector<CallSignature> sigs;
        std::vector<std::vector<int>> lists;
        for (int q = 0; q < size(); ++q) {
          sigs.push_back(state_->slot(seq, q).sig);
          lists.push_back(state_->slot(seq, q).split_ranks);
        }
        check_agreement(slot.sig, sigs, *this);
        check_split_agreement(op_name, lists, same_everywhere, *this);
        const auto it = std::find(mine.begin(), mine.end(), rank());
        if (it == mine.end()) return;
        std::vector<int> members;
        for (int q : mine) members.push_back(world_ranks()[static_cast<size_t>(q)]);
        const std::string key =
            fmt::format("{}/{}:[{}]", state_->key(), seq, fmt::join(members, ","));
        result = std::make_shared<ProcessGroupThreads>(state_->world()->join_group(key, members),
                                                       static_cast<int>(it - mine.begin()),
                                                       default_timeout());
      },
      false);
  return result;
}

}  // namespace tessera::dist::detail
