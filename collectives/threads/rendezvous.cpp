#include "tessera/collectives/threads/rendezvous.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "tessera/collectives/local_kernels.h"

namespace tessera::dist::detail {

namespace {
// Yields before blocking: a peer that is about to arrive usually does within a few yields, and
// blocking costs two context switches per waiter. This holds with more ranks than cores too: the
// yield hands the core to a runnable peer instead of holding it (4 ranks on 2 cores: barrier
// 2.4 us, against 12 us when waiters blocked at once). The spin is bounded in time: on a loaded
// machine one yield can take a whole time slice, and 256 of them would outlast short timeouts;
// a rank waiting out a long data phase gives up at most kMaxSpin of its core's time.
constexpr int kSpins = 256;
constexpr auto kMaxSpin = std::chrono::microseconds(50);

// The rank thread the calling thread is (Note [Deadlocks among rank threads]).
struct RankThread {
  const ThreadsWorld* world = nullptr;
  int rank = -1;
};
thread_local RankThread tls_rank_thread;

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// "rank 5 (rank 1 of threads group [4, 5])": a group's rank beside the world's.
std::string rank_in(int world_rank, int group_rank, const std::string& where) {
  return ::tessera::detail::concat_message("rank ", world_rank, " (rank ", group_rank, " of ",
                                           where, ")");
}

// Unregisters the calling rank thread's wait when it leaves it, by any path.
class BlockedScope {
 public:
  BlockedScope(ThreadsWorld& world, int world_rank, BlockedWait wait)
      : world_(world), world_rank_(world_rank) {
    world_.block(world_rank, std::move(wait));
  }
  ~BlockedScope() { world_.unblock(world_rank_); }
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;

 private:
  ThreadsWorld& world_;
  int world_rank_;
};

}  // namespace

bool BlockedWait::satisfied() const {
  if (completed != nullptr) return completed->load(std::memory_order_acquire) >= target;
  return done != nullptr && done->load(std::memory_order_acquire);
}

ThreadsWorld::ThreadsWorld(int size, bool detect_deadlocks)
    : exited_(static_cast<size_t>(size)),
      progress_(static_cast<size_t>(size)),
      blocked_(static_cast<size_t>(size)),
      detection_off_(!detect_deadlocks) {}

std::string ThreadsWorld::abort_reason() const {
  std::lock_guard lock(mutex_);
  return abort_reason_;
}

void ThreadsWorld::abort(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  wake_all_groups();
}

void ThreadsWorld::mark_exited(int world_rank) {
  {
    std::lock_guard lock(mutex_);
    exited_[static_cast<size_t>(world_rank)].store(true);
    ++epoch_;
  }
  wake_all_groups();
}

void ThreadsWorld::enter_rank_thread(int world_rank) { tls_rank_thread = {this, world_rank}; }
void ThreadsWorld::leave_rank_thread() { tls_rank_thread = {}; }

bool ThreadsWorld::is_rank_thread(int world_rank) const {
  return tls_rank_thread.world == this && tls_rank_thread.rank == world_rank;
}

void ThreadsWorld::block(int world_rank, BlockedWait wait) {
  std::unique_lock lock(mutex_);
  if (!is_rank_thread(world_rank)) {
    if (!on_progress_thread()) detection_off_ = true;
    return;
  }
  blocked_[static_cast<size_t>(world_rank)] = std::move(wait);
  ++epoch_;
  for (;;) {
    if (find_deadlock(world_rank).empty()) return;
    const uint64_t seen = epoch_;
    lock.unlock();
    std::this_thread::sleep_for(kDeadlockGrace);
    lock.lock();
    if (epoch_ != seen) continue;  // a rank moved meanwhile: look again
    std::string deadlock = find_deadlock(world_rank);
    if (deadlock.empty()) return;
    lock.unlock();
    abort(deadlock);
    return;
  }
}

void ThreadsWorld::unblock(int world_rank) {
  std::lock_guard lock(mutex_);
  auto& entry = blocked_[static_cast<size_t>(world_rank)];
  if (!entry.has_value() || !is_rank_thread(world_rank)) return;
  entry.reset();
  ++epoch_;
}

bool ThreadsWorld::progress_busy_locked(int world_rank) const {
  for (const auto& p : progress_[static_cast<size_t>(world_rank)]) {
    if (auto live = p.lock(); live && live->busy()) return true;
  }
  return false;
}

std::string ThreadsWorld::describe_rank_locked(int world_rank) const {
  const auto r = static_cast<size_t>(world_rank);
  if (exited_[r].load()) return fmt::format("rank {} returned from its run_threads function", r);
  const std::optional<BlockedWait>& b = blocked_[r];
  if (!b.has_value() || b->satisfied()) {
    return fmt::format("rank {} is running, in no collective of this world", r);
  }
  std::string what = b->op;
  if (b->context != nullptr && b->context->description != nullptr) {
    what += " (" + *b->context->description + ")";
  }
  return fmt::format("rank {} is in {} on {}, waiting for rank(s) {} (rank(s) {} of that group)", r,
                     what, *b->where, join_ranks(b->waits_for), join_ranks(b->waits_for_in_group));
}

std::string ThreadsWorld::find_deadlock(int world_rank) const {
  if (detection_off_ || aborted()) return "";
  std::vector<bool> seen(exited_.size(), false);
  std::vector<int> stack{world_rank};
  while (!stack.empty()) {
    const int q = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(q)]) continue;
    seen[static_cast<size_t>(q)] = true;
    const std::optional<BlockedWait>& b = blocked_[static_cast<size_t>(q)];
    if (!b.has_value() || b->satisfied() || progress_busy_locked(q)) return "";  // can go on
    for (int w : b->waits_for) {
      // Its own wait fails at once, naming the rank that left (a plainer message than this).
      if (exited_[static_cast<size_t>(w)].load()) return "";
      stack.push_back(w);
    }
  }
  // Every rank's state, not only the stuck ones': what the others do says which skipped what.
  constexpr int kDescribed = 16;
  std::string message =
      "deadlock: every rank this one waits for waits itself, so none can go on (ranks issued "
      "collectives in different orders, or one skipped a collective the others made): ";
  for (int r = 0; r < size() && r < kDescribed; ++r) {
    message += (r == 0 ? "" : "; ") + describe_rank_locked(r);
  }
  if (size() > kDescribed) message += fmt::format("; and {} more ranks", size() - kDescribed);
  return message;
}

std::string ThreadsWorld::describe_ranks(const std::vector<int>& world_ranks) const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (int r : world_ranks) out += (out.empty() ? "" : "; ") + describe_rank_locked(r);
  return out;
}

void ThreadsWorld::wake_all_groups() {
  std::vector<std::shared_ptr<GroupState>> live;
  {
    std::lock_guard lock(mutex_);
    for (const auto& g : groups_) {
      if (auto s = g.lock()) live.push_back(std::move(s));
    }
  }
  for (const auto& s : live) s->wake();
}

std::shared_ptr<GroupState> ThreadsWorld::join_group(const std::string& key,
                                                     const std::vector<int>& world_ranks) {
  std::lock_guard lock(mutex_);
  Pending& p = pending_groups_[key];
  if (!p.state) {
    p.state = std::make_shared<GroupState>(shared_from_this(), key, world_ranks);
    std::erase_if(groups_, [](const auto& g) { return g.expired(); });
    groups_.push_back(p.state);
  }
  std::shared_ptr<GroupState> state = p.state;
  if (++p.joined == world_ranks.size()) pending_groups_.erase(key);
  return state;
}

void ThreadsWorld::track(int world_rank, const std::shared_ptr<ProgressThread>& progress) {
  std::lock_guard lock(mutex_);
  auto& list = progress_[static_cast<size_t>(world_rank)];
  std::erase_if(list, [](const auto& p) { return p.expired(); });
  list.push_back(progress);
}

void ThreadsWorld::drain(int world_rank) {
  std::vector<std::shared_ptr<ProgressThread>> live;
  {
    std::lock_guard lock(mutex_);
    for (const auto& p : progress_[static_cast<size_t>(world_rank)]) {
      if (auto s = p.lock()) live.push_back(std::move(s));
    }
  }
  for (const auto& p : live) p->drain();
}

GroupState::GroupState(std::shared_ptr<ThreadsWorld> world, std::string key,
                       std::vector<int> world_ranks)
    : world_(std::move(world)),
      key_(std::move(key)),
      world_ranks_(std::move(world_ranks)),
      arrivals_(world_ranks_.size(), 0) {
  slots_[0].resize(world_ranks_.size());
  slots_[1].resize(world_ranks_.size());
}

void GroupState::abort(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void GroupState::wake() {
  // Taking the lock orders the wake-up after a waiter's last check of the flags it waits on.
  { std::lock_guard lock(mutex_); }
  cv_.notify_all();
}

void GroupState::end_reading() {
  // The last reader wakes the waiters; taking the lock orders the notify after a waiter's check.
  // Both counters are sequentially consistent: a waiter that registers after this load sees
  // readers_ already decremented and does not sleep.
  if (readers_.fetch_sub(1) == 1 && reader_waiters_.load() > 0) {
    { std::lock_guard lock(mutex_); }
    cv_.notify_all();
  }
}

void GroupState::wait_for_readers() {
  std::unique_lock lock(mutex_);
  ++reader_waiters_;
  cv_.wait(lock, [&] { return readers_.load() == 0; });
  --reader_waiters_;
}

void GroupState::throw_if_aborted(const char* op, const std::string& where) const {
  if (aborted_.load(std::memory_order_acquire)) {
    throw CommError(
        ::tessera::detail::concat_message("[", op, "] ", where, " was aborted: ", abort_reason_));
  }
  if (world_->aborted()) {
    throw CommError(::tessera::detail::concat_message("[", op, "] ", where,
                                                      " was aborted: ", world_->abort_reason()));
  }
}

void GroupState::fail(std::unique_lock<std::mutex>& lock, const std::string& message) {
  TS_INTERNAL_ASSERT(lock.owns_lock());
  if (!aborted_.load()) {
    abort_reason_ = message;
    aborted_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  throw CommError(message);
}

bool GroupState::departed(int rank) const {
  return world_->exited(world_ranks_[static_cast<size_t>(rank)]);
}

void GroupState::arrive_and_wait(int rank, uint64_t phase, Clock::time_point deadline,
                                 const char* op, std::chrono::milliseconds timeout,
                                 const std::string& where, bool opens_data_phase) {
  const uint64_t target = phase + 1;
  {
    std::unique_lock lock(mutex_);
    throw_if_aborted(op, where);
    arrivals_[static_cast<size_t>(rank)] = target;
    if (++arrived_ == size()) {
      arrived_ = 0;
      if (opens_data_phase) readers_.fetch_add(size());
      completed_.store(target, std::memory_order_release);
      if (sleepers_ > 0) {
        lock.unlock();
        cv_.notify_all();
      }
      return;
    }
  }
  const Clock::time_point spin_until = std::min(deadline, Clock::now() + kMaxSpin);
  for (int i = 0; i < kSpins; ++i) {
    if (completed_.load(std::memory_order_acquire) >= target) return;
    if (aborted_.load(std::memory_order_relaxed) || world_->aborted()) break;
    if (i % 8 == 7 && Clock::now() > spin_until) break;
    std::this_thread::yield();
  }
  BlockedWait blocked{op, &where, current_call_context(), {}, {}, &completed_, target, nullptr};
  {
    std::lock_guard lock(mutex_);
    for (int r = 0; r < size(); ++r) {
      if (arrivals_[static_cast<size_t>(r)] < target) {
        blocked.waits_for_in_group.push_back(r);
        blocked.waits_for.push_back(world_ranks_[static_cast<size_t>(r)]);
      }
    }
  }
  // Not under mutex_: detecting a deadlock aborts the world, which wakes every group.
  const BlockedScope blocked_scope(*world_, world_ranks_[static_cast<size_t>(rank)],
                                   std::move(blocked));
  std::unique_lock lock(mutex_);
  ++sleepers_;
  struct Leave {
    int& sleepers;
    ~Leave() { --sleepers; }
  } leave{sleepers_};
  while (completed_.load(std::memory_order_acquire) < target) {
    throw_if_aborted(op, where);
    for (int r = 0; r < size(); ++r) {
      if (arrivals_[static_cast<size_t>(r)] < target && departed(r)) {
        fail(lock, ::tessera::detail::concat_message(
                       "[", op, "] ", rank_in(world_ranks_[static_cast<size_t>(r)], r, where),
                       " left run_threads without joining this ", op));
      }
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        completed_.load(std::memory_order_acquire) < target) {
      std::vector<int> world_missing, group_missing;
      for (int r = 0; r < size(); ++r) {
        if (arrivals_[static_cast<size_t>(r)] < target) {
          group_missing.push_back(r);
          world_missing.push_back(world_ranks_[static_cast<size_t>(r)]);
        }
      }
      fail(lock, ::tessera::detail::concat_message(
                     "[", op, "] timed out after ", timeout.count(), " ms on ", where,
                     " waiting for rank(s) ", join_ranks(world_missing), " (rank(s) ",
                     join_ranks(group_missing),
                     " of the group): ", world_->describe_ranks(world_missing)));
    }
  }
}

void GroupState::post(const std::shared_ptr<P2P>& half, const std::string& where) {
  std::shared_ptr<P2P> other;
  {
    std::unique_lock lock(mutex_);
    throw_if_aborted(half->op, where);
    Channel& channel = channels_[{half->src, half->dst}];
    auto& mine = half->sending ? channel.sends : channel.recvs;
    auto& theirs = half->sending ? channel.recvs : channel.sends;
    if (theirs.empty()) {
      mine.push_back(half);
      return;
    }
    other = std::move(theirs.front());
    theirs.pop_front();
    half->matched = true;
    other->matched = true;
  }
  P2P& send = half->sending ? *half : *other;
  P2P& recv = half->sending ? *other : *half;
  bool agreed = true;
  try {
    check_p2p_agreement(send.op, send.sig, recv.sig, send.src, send.dst, where, world_ranks_);
  } catch (const Error&) {
    agreed = false;
  }
  if (agreed) copy_bytes(bytes_of(recv.tensor), bytes_of(send.tensor), recv.tensor.nbytes());
  {
    std::lock_guard lock(mutex_);
    for (P2P* p : {&send, &recv}) {
      p->agreed = agreed;
      p->other_sig = p == &send ? recv.sig : send.sig;
      p->tensor = Tensor();  // done halves do not need their tensors any more
      p->done = true;
    }
  }
  cv_.notify_all();
}

bool GroupState::done(const P2P& half) {
  std::lock_guard lock(mutex_);
  return half.done;
}

void GroupState::wait(P2P& half, const std::string& where) {
  const int peer = half.sending ? half.dst : half.src;
  const int world_peer = world_ranks_[static_cast<size_t>(peer)];
  const int me = world_ranks_[static_cast<size_t>(half.sending ? half.src : half.dst)];
  std::optional<BlockedScope> blocked;
  if (!half.done.load()) {
    blocked.emplace(
        *world_, me,
        BlockedWait{
            half.op, &where, current_call_context(), {world_peer}, {peer}, nullptr, 0, &half.done});
  }
  std::unique_lock lock(mutex_);
  while (!half.done) {
    throw_if_aborted(half.op, where);
    if (!half.matched && departed(peer)) {
      fail(lock,
           ::tessera::detail::concat_message("[", half.op, "] ", rank_in(world_peer, peer, where),
                                             " left run_threads without matching this ", half.op));
    }
    if (cv_.wait_until(lock, half.deadline) == std::cv_status::timeout && !half.done) {
      fail(lock, ::tessera::detail::concat_message(
                     "[", half.op, "] timed out after ", half.timeout.count(), " ms on ", where,
                     " waiting for ", rank_in(world_peer, peer, where), ": ",
                     world_->describe_ranks({world_peer})));
    }
  }
  if (!half.agreed) {
    check_p2p_agreement(half.op, half.sending ? half.sig : half.other_sig,
                        half.sending ? half.other_sig : half.sig, half.src, half.dst, where,
                        world_ranks_);
  }
}

}  // namespace tessera::dist::detail
