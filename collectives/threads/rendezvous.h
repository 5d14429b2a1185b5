#pragma once
// Internal: the shared state through which the ranks (threads) of the threads backend meet.
//
// Note [Threads rendezvous]
// The members of a group share one GroupState. A collective is a few phases separated by
// barriers: each rank publishes its call (a pointer to its Call and the call's signature) in its
// slot and arrives at barrier A; then every rank checks the same signatures (so all raise the same
// Error on disagreement) and reads its peers' tensors directly (data moves once, no staging); an
// end barrier keeps each rank's tensors alive and unchanged until every peer is done reading.
// Slots are double-buffered by collective parity: a rank can only reuse a slot two collectives
// later, after every peer has passed barrier A of the collective in between, i.e. stopped reading.
// Waits yield briefly, then block on a condition variable with a deadline. A rank gives up when
// the deadline passes (it then aborts the group), when the group or its world is aborted (a rank
// failed), or when a member it waits for has left run_threads. Failure is sticky: an aborted
// group fails every later collective.
//
// Note [Leaving a collective early]
// The end barrier is what keeps a rank's Call and tensors alive while peers read them. A rank that
// leaves the data phase by an exception (its own failure, or an abort of the group or the world
// raised at a barrier) skips that barrier, and its Call is destroyed as the exception unwinds:
// a peer still copying from it would read freed memory. So every member counts as a reader of
// the group from the moment barrier A completes (the last to arrive counts them all, before any
// can leave: a rank counting itself after the barrier could be missed by a fast peer) until it
// leaves the data phase, and a rank leaving by an exception first waits until no peer reads. The
// wait is short and cannot deadlock: readers are copying (no barrier to wait for) or blocked at
// a barrier, which the abort fails at once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/collectives/call.h"
#include "tessera/collectives/progress_thread.h"

// Note [Deadlocks among rank threads]
// A rank that skips a collective, or ranks issuing collectives in different orders, leave every
// rank waiting for one that is itself waiting. Rank threads share one process, so the world can
// see it at once instead of after the timeout: while a rank thread sleeps in a collective it
// records what it waits in and for whom (a BlockedWait), and the thread that goes to sleep last
// follows the waits from itself. When every rank it reaches is asleep in a wait not yet satisfied,
// or has returned from its function, none of them can go on: the world is aborted with a message
// naming what each of those ranks waits in, so every rank raises it. A rank counts as running (so
// no deadlock is claimed through it) while it is awake, while one of its progress threads has
// async collectives queued or running, and when a thread other than its rank thread or progress
// threads issues its collectives: a user's thread could still arrive, unseen, so a world where one
// ever did keeps only the timeout (ThreadsOptions::detect_deadlocks = false keeps only the timeout
// from the start, for programs whose own threads issue collectives). Before aborting, the detecting
// thread waits kDeadlockGrace and looks again, with nothing having changed meanwhile: a wait
// satisfied just as it looked (its rank not yet awake) is not a deadlock.

namespace tessera::dist::detail {

using Clock = std::chrono::steady_clock;

class GroupState;

// What a rank thread sleeps in (Note [Deadlocks among rank threads]). The pointers stay valid
// while the record is registered: the waiting rank unregisters it before it leaves the wait.
struct BlockedWait {
  const char* op = "";
  const std::string* where = nullptr;                // the group
  const CallContext* context = nullptr;              // what issued the collective, if known
  std::vector<int> waits_for;                        // world ranks it waits for
  std::vector<int> waits_for_in_group;               // the same, as ranks of the group
  const std::atomic<uint64_t>* completed = nullptr;  // a barrier: satisfied at `target`
  uint64_t target = 0;
  const std::atomic<bool>* done = nullptr;  // a point-to-point half: satisfied when set
  bool satisfied() const;
};

// The ranks of one run_threads call.
class ThreadsWorld : public std::enable_shared_from_this<ThreadsWorld> {
 public:
  explicit ThreadsWorld(int size, bool detect_deadlocks = false);

  int size() const { return static_cast<int>(exited_.size()); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  std::string abort_reason() const;
  // A rank failed: every group of this world fails its pending and later collectives.
  void abort(const std::string& reason);
  bool exited(int world_rank) const { return exited_[static_cast<size_t>(world_rank)].load(); }
  // `world_rank`'s function returned: waits for that rank's peers fail instead of timing out.
  void mark_exited(int world_rank);

  // The state every member of a new group shares: the first member to ask under `key` creates
  // it, and the entry is dropped once all members have it.
  std::shared_ptr<GroupState> join_group(const std::string& key,
                                         const std::vector<int>& world_ranks);
  // Progress threads of a rank's groups, drained when the rank's function returns.
  void track(int world_rank, const std::shared_ptr<ProgressThread>& progress);
  void drain(int world_rank);

  // The calling thread is `world_rank`'s rank thread until leave_rank_thread.
  void enter_rank_thread(int world_rank);
  void leave_rank_thread();
  // The calling thread sleeps in `wait` for `world_rank` until unblock; aborts the world when
  // that is a deadlock (Note [Deadlocks among rank threads]). Only a rank thread's waits are
  // recorded; another thread's (not a progress thread) turns detection off for the world.
  void block(int world_rank, BlockedWait wait);
  void unblock(int world_rank);
  // What each of `world_ranks` is doing, for a timeout's message.
  std::string describe_ranks(const std::vector<int>& world_ranks) const;

 private:
  void wake_all_groups();
  bool is_rank_thread(int world_rank) const;
  // With mutex_ held: the deadlock `world_rank`'s wait is part of, described, or "".
  std::string find_deadlock(int world_rank) const;
  std::string describe_rank_locked(int world_rank) const;
  bool progress_busy_locked(int world_rank) const;

  mutable std::mutex mutex_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  std::vector<std::atomic<bool>> exited_;
  std::vector<std::weak_ptr<GroupState>> groups_;
  struct Pending {
    std::shared_ptr<GroupState> state;
    size_t joined = 0;
  };
  std::map<std::string, Pending> pending_groups_;
  std::vector<std::vector<std::weak_ptr<ProgressThread>>> progress_;
  std::vector<std::optional<BlockedWait>> blocked_;
  uint64_t epoch_ = 0;  // changes whenever a rank blocks, wakes or exits
  // Off from the start (ThreadsOptions), or since a thread other than a rank's own issued.
  bool detection_off_;
};

// How long a suspected deadlock must hold, unchanged, before the world is aborted.
inline constexpr auto kDeadlockGrace = std::chrono::milliseconds(100);

// What a rank publishes for one collective (see Note [Threads rendezvous]).
struct Slot {
  const Call* call = nullptr;
  CallSignature sig;
  std::vector<int> split_ranks;  // split / new_group only
};

class GroupState {
 public:
  GroupState(std::shared_ptr<ThreadsWorld> world, std::string key, std::vector<int> world_ranks);

  int size() const { return static_cast<int>(world_ranks_.size()); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  const std::shared_ptr<ThreadsWorld>& world() const { return world_; }
  // Unique within the world; subgroups extend their parent's key.
  const std::string& key() const { return key_; }

  Slot& slot(uint64_t seq, int rank) { return slots_[seq & 1][static_cast<size_t>(rank)]; }

  // Barrier number `phase` (each member counts its own barriers on this group, in lockstep).
  // Throws CommError naming `op` on abort, deadline or a departed member. `opens_data_phase`
  // (barrier A of a collective or split): once it completes every member is a reader and must
  // call end_reading once (Note [Leaving a collective early]).
  void arrive_and_wait(int rank, uint64_t phase, Clock::time_point deadline, const char* op,
                       std::chrono::milliseconds timeout, const std::string& where,
                       bool opens_data_phase);

  // Point to point: the sender and the receiver each post their half; whichever comes second
  // checks that they agree and copies, so neither side blocks to post (isend-then-recv rings
  // work) and messages between two ranks match in order.
  struct P2P {
    bool sending = false;
    int src = 0;  // group ranks
    int dst = 0;
    Tensor tensor;  // kept alive until matched, even past its rank's return
    CallSignature sig;
    const char* op = "";
    Clock::time_point deadline;
    std::chrono::milliseconds timeout{0};
    bool matched = false;           // taken by the other side (the copy may still be running)
    std::atomic<bool> done{false};  // read without the lock by deadlock detection
    // Set when done. On disagreement nothing is copied and each side raises its own Error, in
    // its own thread (exception objects are not shared across threads).
    bool agreed = true;
    CallSignature other_sig;
  };
  void post(const std::shared_ptr<P2P>& half, const std::string& where);
  // Waits until `half` is done. Throws the Error of a disagreement with the other half, or
  // CommError on abort, deadline or the departure of a peer that never posted the other half.
  void wait(P2P& half, const std::string& where);
  bool done(const P2P& half);

  // A member leaves the data phase of a collective (Note [Leaving a collective early]).
  void end_reading();
  // Blocks until no member is in a data phase.
  void wait_for_readers();

  // Fails this group's pending and later collectives with `reason`.
  void abort(const std::string& reason);
  void wake();

 private:
  // Throws CommError when the group or world is aborted.
  void throw_if_aborted(const char* op, const std::string& where) const;
  // Aborts the group with `message` and throws it; `lock` holds mutex_.
  [[noreturn]] void fail(std::unique_lock<std::mutex>& lock, const std::string& message);
  bool departed(int rank) const;

  std::shared_ptr<ThreadsWorld> world_;
  std::string key_;
  std::vector<int> world_ranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  int sleepers_ = 0;
  int arrived_ = 0;
  std::atomic<int> readers_{0};         // members in a data phase
  std::atomic<int> reader_waiters_{0};  // members in wait_for_readers
  std::atomic<uint64_t> completed_{0};  // barriers completed
  std::vector<uint64_t> arrivals_;      // per member: barriers arrived at
  std::vector<Slot> slots_[2];
  // Unmatched halves per (src, dst): sends and receives waiting for their other half. Made on
  // first use: a table of every pair would make group setup quadratic in the group size.
  struct Channel {
    std::deque<std::shared_ptr<P2P>> sends;
    std::deque<std::shared_ptr<P2P>> recvs;
  };
  std::map<std::pair<int, int>, Channel> channels_;
};

}  // namespace tessera::dist::detail
