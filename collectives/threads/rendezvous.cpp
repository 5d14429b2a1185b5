#include "collectives/threads/rendezvous.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "collectives/local_kernels.h"

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
}  // namespace

ThreadsWorld::ThreadsWorld(int size)
    : exited_(static_cast<size_t>(size)), progress_(static_cast<size_t>(size)) {}

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
  exited_[static_cast<size_t>(world_rank)].store(true);
  wake_all_groups();
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
  std::unique_lock lock(mutex_);
  ++sleepers_;
  struct Leave {
    int& sleepers;
    ~Leave() { --sleepers; }
  } leave{sleepers_};
  while (completed_.load(std::memory_order_acquire) < target) {
    throw_if_aborted(op, where);
    std::vector<int> missing;
    for (int r = 0; r < size(); ++r) {
      if (arrivals_[static_cast<size_t>(r)] < target) missing.push_back(r);
    }
    for (int r : missing) {
      if (departed(r)) {
        fail(lock,
             ::tessera::detail::concat_message("[", op, "] rank ", r, " of ", where,
                                               " left run_threads without joining this ", op));
      }
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        completed_.load(std::memory_order_acquire) < target) {
      std::string who;
      for (int r = 0; r < size(); ++r) {
        if (arrivals_[static_cast<size_t>(r)] < target)
          who += (who.empty() ? "" : ", ") + std::to_string(r);
      }
      fail(lock, ::tessera::detail::concat_message("[", op, "] timed out after ", timeout.count(),
                                                   " ms on ", where, " waiting for rank(s) ", who));
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
    check_p2p_agreement(send.op, send.sig, recv.sig, send.src, send.dst, where);
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
  std::unique_lock lock(mutex_);
  const int peer = half.sending ? half.dst : half.src;
  while (!half.done) {
    throw_if_aborted(half.op, where);
    if (!half.matched && departed(peer)) {
      fail(lock,
           ::tessera::detail::concat_message("[", half.op, "] rank ", peer, " of ", where,
                                             " left run_threads without matching this ", half.op));
    }
    if (cv_.wait_until(lock, half.deadline) == std::cv_status::timeout && !half.done) {
      fail(lock, ::tessera::detail::concat_message("[", half.op, "] timed out after ",
                                                   half.timeout.count(), " ms on ", where,
                                                   " waiting for rank ", peer));
    }
  }
  if (!half.agreed) {
    check_p2p_agreement(half.op, half.sending ? half.sig : half.other_sig,
                        half.sending ? half.other_sig : half.sig, half.src, half.dst, where);
  }
}

}  // namespace tessera::dist::detail
