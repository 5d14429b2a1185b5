#pragma once
// Internal: memory shared by the ranks of an mpi group that all run on one machine, through which
// the mpi backend moves small collectives (Note [Small collectives through shared memory]).

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tessera::dist::detail {

// Note [Small collectives through shared memory]
// Open MPI moves a small all_gather, all_to_all or broadcast between the processes of one machine
// as rounds of point-to-point messages through its shared-memory transport, each round a
// handshake; on a loaded machine that is ~10 us for 4 ranks. When every rank of a group is on one
// machine, the group maps one shared buffer: each rank copies what it contributes into its own
// slot, all meet at one MPI_Barrier, and each copies (or reduces) what it needs straight from the
// peers' slots. Slots alternate between two sets from one such collective to the next: a rank
// writes set s only after passing the barrier of the collective that used set 1 - s, which every
// peer reaches only after it has finished reading set s in the collective before. So one barrier
// per collective suffices, whatever other (non-synchronizing) calls run in between. The barrier
// is a counter in the shared memory itself (MPI_Barrier costs several times more): a rank that
// never arrives leaves the others waiting until the watchdog ends the job (Note [MPI job
// failure]), as a stuck MPI call would. In checked mode every collective of the group meets at
// this barrier (the large ones with only their fingerprint in their tag, before MPI moves the
// data), so the rule is: a collective takes a set exactly when it passes a barrier here.
class NodeBuffers {
 public:
  // Collective over `comm`. Null (on every rank alike) when the ranks are not all on one machine
  // or the shared memory cannot be made; the group then uses MPI for everything.
  static std::unique_ptr<NodeBuffers> create(MPI_Comm comm, size_t slot_bytes);
  ~NodeBuffers();
  NodeBuffers(const NodeBuffers&) = delete;
  NodeBuffers& operator=(const NodeBuffers&) = delete;

  // Bytes of each rank's tag: a small record exchanged beside the slot's data (in checked mode
  // the call's fingerprint, Note [Agreement fingerprints] in collectives/call.h).
  static constexpr size_t kTagBytes = 64;

  size_t slot_bytes() const { return slot_bytes_; }
  // The slot of `rank` in the set that collective number `call` (counted per group) uses.
  char* slot(int rank, uint64_t call) const {
    return slots_ + (static_cast<size_t>(rank) * 2 + call % 2) * slot_bytes_;
  }
  // The tag of `rank` in that set; a line of its own, so that ranks writing theirs do not contend.
  char* tag(int rank, uint64_t call) const {
    return tags_ + (static_cast<size_t>(rank) * 2 + call % 2) * kTagBytes;
  }
  // Returns once every rank of the group has arrived at barrier number `number` (counted per
  // group; a collective may take more than one); orders each rank's writes before it arrives
  // before every rank's reads after it leaves.
  void barrier(uint64_t number) const;

 private:
  static constexpr size_t kHeaderBytes = 64;  // the arrival counter, on a line of its own

  NodeBuffers(char* base, size_t mapped_bytes, size_t slot_bytes, int size)
      : base_(base),
        tags_(base + kHeaderBytes),
        slots_(tags_ + static_cast<size_t>(size) * 2 * kTagBytes),
        mapped_bytes_(mapped_bytes),
        slot_bytes_(slot_bytes),
        size_(size) {}

  char* base_;
  char* tags_;
  char* slots_;
  size_t mapped_bytes_;
  size_t slot_bytes_;
  int size_;
};

}  // namespace tessera::dist::detail
