#pragma once
// Internal: the threads backend's ProcessGroup (one object per rank and group). See Note
// [Threads rendezvous] for how the ranks meet.

#include <atomic>
#include <memory>
#include <vector>

#include "tessera/collectives/threads/rendezvous.h"

namespace tessera::dist::detail {

class ProcessGroupThreads final : public ProcessGroup {
 public:
  ProcessGroupThreads(std::shared_ptr<GroupState> state, int rank,
                      std::chrono::milliseconds default_timeout);
  ~ProcessGroupThreads() override;

  std::string_view backend_name() const override { return "threads"; }
  bool moves_strided_tensors() const override { return true; }

 protected:
  WorkPtr run(Call&& call) override;
  ProcessGroupPtr split_group(const char* op_name, const std::vector<int>& mine,
                              bool same_everywhere) override;

 private:
  // Runs on the issuing thread or the progress thread, one call at a time.
  void execute(const Call& call);
  // The next barrier of this group (see GroupState::arrive_and_wait).
  void phase(const char* op, Clock::time_point deadline, std::chrono::milliseconds timeout,
             bool opens_data_phase = false);
  void move_data(const Call& call, uint64_t seq, Clock::time_point deadline);
  void all_reduce(const Call& call, uint64_t seq, Clock::time_point deadline);
  void all_gather_into_tensor(const Call& call, uint64_t seq);
  void reduce_scatter_tensor(const Call& call, uint64_t seq);
  void all_to_all(const Call& call, uint64_t seq);
  WorkPtr send_recv(const Call& call);
  const Call& peer_call(uint64_t seq, int q) { return *state_->slot(seq, q).call; }

  std::shared_ptr<GroupState> state_;
  std::string where_;
  uint64_t seq_ = 0;               // collectives issued on this group
  uint64_t phase_ = 0;             // barriers passed on this group
  std::vector<char> scratch_;      // small all_reduce results
  std::atomic<bool> busy_{false};  // a thread is issuing (Note [One thread per rank and group])
  std::shared_ptr<ProgressThread> progress_;
};

}  // namespace tessera::dist::detail
