#pragma once
// Internal: the mpi backend's ProcessGroup (one per process and group, over its own
// communicator, so collectives on different groups never match each other).

#include <memory>
#include <vector>

#include "tessera/collectives/call.h"
#include "tessera/collectives/mpi/mpi_runtime.h"
#include "tessera/collectives/mpi/node_buffers.h"
#include "tessera/collectives/progress_thread.h"

namespace tessera::dist::detail {

class ProcessGroupMPI final : public ProcessGroup {
 public:
  // Takes ownership of `comm`. `check`: every call's arguments are checked across ranks first
  // (Note [Agreement fingerprints] in collectives/call.h; point to point swaps signatures).
  // `async_threads`: MPI allows calls from several threads, so async calls get a progress thread.
  ProcessGroupMPI(MPI_Comm comm, std::vector<int> world_ranks, std::chrono::milliseconds timeout,
                  bool check, bool async_threads);
  ~ProcessGroupMPI() override;

  std::string_view backend_name() const override { return "mpi"; }

 protected:
  WorkPtr run(Call&& call) override;
  ProcessGroupPtr split_group(const char* op_name, const std::vector<int>& mine,
                              bool same_everywhere) override;

 private:
  void execute(const Call& call);
  // With node_ (the group is on one machine), every call that meets the other ranks in shared
  // memory: small collectives (their data), barriers and, in checked mode, every collective (its
  // fingerprint, checked here). Returns whether the call is done; false: MPI moves its data
  // (node_collectives.cpp).
  bool run_on_node(const Call& call);
  // out = op over the ranks' slots (of set `set`) of elements [begin, begin + count).
  void reduce_slots(const Call& call, uint64_t set, int64_t begin, int64_t count, char* out);
  void node_all_reduce(const Call& call, uint64_t set);
  // Checked mode without node_: combines the ranks' fingerprints of `call` with one
  // MPI_Allreduce and raises when they disagree.
  void agree_over_mpi(const Call& call);
  // After fingerprints disagreed: all-gathers the signatures and throws check_agreement's Error,
  // the same on every rank.
  [[noreturn]] void raise_disagreement(const Call& call);
  void all_reduce(const Call& call);
  // Recursive doubling over partials in the accumulator dtype.
  void all_reduce_small(const Call& call);
  // Rank r gets op over every rank's chunk r of `in` (chunk q: elements [begins[q],
  // begins[q+1])) into `out`, exchanging chunks pairwise and reducing with reduce_n.
  void reduce_scatter(const Call& call, const char* in, char* out,
                      const std::vector<int64_t>& begins);
  void gather_like(const Call& call);
  void scatter(const Call& call);
  void all_to_all(const Call& call);
  char* scratch(size_t bytes);

  MPI_Comm comm_;
  bool check_;
  bool async_threads_;
  std::string where_;
  std::vector<char> scratch_;  // reused across calls: fresh pages are slow to touch
  std::shared_ptr<ProgressThread> progress_;
  std::unique_ptr<NodeBuffers> node_;  // null unless every rank is on this machine
  uint64_t node_calls_ = 0;            // collectives through node_ so far (their slot sets)
  uint64_t node_barriers_ = 0;         // barriers on node_ so far
};

}  // namespace tessera::dist::detail
