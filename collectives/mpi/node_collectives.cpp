// The mpi backend's small collectives through NodeBuffers (Note [Small collectives through shared
// memory]): each rank writes its contribution into its slot, one barrier, each reads the peers'.
// In checked mode the call's fingerprint rides along in the rank's tag (Note [Agreement
// fingerprints] in collectives/call.h), so checking costs small collectives no extra barrier.

#include <cstring>
#include <vector>

#include "tessera/collectives/local_kernels.h"
#include "tessera/collectives/mpi/process_group_mpi.h"

namespace tessera::dist::detail {

namespace {

// The bytes a rank contributes, or 0 when the call does not go through shared memory. Decided
// from what the fingerprint covers (the kind, dtype and element count), so in checked mode ranks
// that decide differently disagree and raise before anyone reads a slot.
// The limits are where collectives_bench saw shared memory stop beating Open MPI on one machine
// (4 ranks): two copies per byte against its single-copy transfers of larger messages.
size_t contribution(const Call& call) {
  constexpr size_t KiB = 1024;
  const auto bytes = [&] { return call.in.nbytes(); };  // `in` is undefined for some kinds
  switch (call.kind) {
    case CollectiveKind::ReduceScatterTensor:
    case CollectiveKind::AllReduce:
      return bytes() <= 256 * KiB ? bytes() : 0;
    case CollectiveKind::AllGatherIntoTensor:
      return bytes() <= 64 * KiB ? bytes() : 0;
    case CollectiveKind::AllToAllSingle:
      return call.equal_splits && bytes() <= 64 * KiB ? bytes() : 0;
    case CollectiveKind::Broadcast:
      return bytes() <= 16 * KiB ? bytes() : 0;
    default:
      return 0;
  }
}

}  // namespace

bool ProcessGroupMPI::run_on_node(const Call& call) {
  size_t bytes = contribution(call);
  if (bytes > node_->slot_bytes()) bytes = 0;
  const bool barrier = call.kind == CollectiveKind::Barrier;
  if (bytes == 0 && !barrier && !check_) return false;
  const int r = rank();
  const uint64_t set = node_calls_++;
  const auto slot = [&](int q) { return node_->slot(q, set); };
  if (bytes > 0 && (call.kind != CollectiveKind::Broadcast || r == call.peer)) {
    std::memcpy(slot(r), bytes_of(call.in), bytes);
  }
  if (check_) {
    static_assert(sizeof(Fingerprint) <= NodeBuffers::kTagBytes);
    const Fingerprint mine = fingerprint_of(signature_of(call), r, size());
    std::memcpy(node_->tag(r, set), &mine, sizeof mine);
  }
  node_->barrier(node_barriers_++);
  if (check_) {
    // Every rank combines the same tags, so all take the same branch.
    Fingerprint all;
    std::memcpy(&all, node_->tag(0, set), sizeof all);
    for (int q = 1; q < size(); ++q) {
      Fingerprint theirs;
      std::memcpy(&theirs, node_->tag(q, set), sizeof theirs);
      all.combine(theirs);
    }
    if (!all.agrees()) raise_disagreement(call);
  }
  if (barrier) return true;
  if (bytes == 0) return false;
  switch (call.kind) {
    case CollectiveKind::Broadcast:
      if (r != call.peer) std::memcpy(bytes_of(call.out), slot(call.peer), bytes);
      break;
    case CollectiveKind::AllGatherIntoTensor:
      for (int q = 0; q < size(); ++q) {
        char* block = bytes_of(call.out) + q * bytes;
        // In place, this rank's block is already where it belongs.
        if (block != bytes_of(call.in)) std::memcpy(block, slot(q), bytes);
      }
      break;
    case CollectiveKind::AllToAllSingle: {
      const size_t block = bytes / static_cast<size_t>(size());
      for (int q = 0; q < size(); ++q) {
        std::memcpy(bytes_of(call.out) + q * block, slot(q) + r * block, block);
      }
      break;
    }
    case CollectiveKind::ReduceScatterTensor:
      reduce_slots(call, set, static_cast<int64_t>(r) * call.out.numel(), call.out.numel(),
                   bytes_of(call.out));
      break;
    case CollectiveKind::AllReduce:
      node_all_reduce(call, set);
      break;
    default:
      TS_INTERNAL_ASSERT(false, "no shared-memory path for ", call.name());
  }
  return true;
}

void ProcessGroupMPI::reduce_slots(const Call& call, uint64_t set, int64_t begin, int64_t count,
                                   char* out) {
  const int n = size();
  const auto offset = begin * static_cast<int64_t>(element_size(call.dtype()));
  std::vector<const void*> ins(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) ins[static_cast<size_t>(q)] = node_->slot(q, set) + offset;
  reduce_n(call.dtype(), call.op, out, ins.data(), n, count);
}

void ProcessGroupMPI::node_all_reduce(const Call& call, uint64_t set) {
  const int64_t count = call.in.numel();
  // Every rank reduces the whole tensor, in the same order, so the results agree bit for bit:
  // for small tensors one barrier costs more than the redundant arithmetic.
  constexpr size_t kWholeBytes = 16 * 1024;
  if (call.in.nbytes() <= kWholeBytes) return reduce_slots(call, set, 0, count, bytes_of(call.out));
  // Larger: rank r reduces chunk r into its own slot (only it reads that part of its slot), and
  // after a second barrier everyone copies every chunk from its owner's slot.
  const int n = size();
  const size_t es = element_size(call.dtype());
  const auto chunk = [&](int q) { return chunk_begin(count, n, q, es); };
  const int r = rank();
  const auto at = [&](int q) { return static_cast<int64_t>(es) * chunk(q); };
  reduce_slots(call, set, chunk(r), chunk(r + 1) - chunk(r), node_->slot(r, set) + at(r));
  node_->barrier(node_barriers_++);
  for (int q = 0; q < n; ++q) {
    std::memcpy(bytes_of(call.out) + at(q), node_->slot(q, set) + at(q),
                static_cast<size_t>(at(q + 1) - at(q)));
  }
}

}  // namespace tessera::dist::detail
