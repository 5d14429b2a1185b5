// The mpi backend's small collectives through NodeBuffers (Note [Small collectives through shared
// memory]): each rank writes its contribution into its slot, one barrier, each reads the peers'.

#include <cstring>
#include <vector>

#include "collectives/local_kernels.h"
#include "collectives/mpi/process_group_mpi.h"

namespace tessera::dist::detail {

namespace {

// The bytes a rank contributes, or 0 when the call does not go through shared memory. Decided
// from what every rank's call agrees on (checked mode verifies that), so all ranks decide alike.
// The limits are where collectives_bench saw shared memory stop beating Open MPI on one machine
// (4 ranks): two copies per byte against its single-copy transfers of larger messages.
size_t contribution(const Call& call) {
  constexpr size_t KiB = 1024;
  const auto bytes = [&] { return call.in.nbytes(); };  // `in` is undefined for some kinds
  switch (call.kind) {
    case CollectiveKind::ReduceScatterTensor:
      return bytes() <= 256 * KiB ? bytes() : 0;
    case CollectiveKind::AllGatherIntoTensor:
    case CollectiveKind::AllReduce:
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
  if (node_ != nullptr && call.kind == CollectiveKind::Barrier) {
    node_->barrier(node_calls_++);
    return true;
  }
  const size_t bytes = contribution(call);
  if (node_ == nullptr || bytes == 0 || bytes > node_->slot_bytes()) return false;
  const int n = size();
  const int r = rank();
  const uint64_t seq = node_calls_++;
  const auto slot = [&](int q) { return node_->slot(q, seq); };
  if (call.kind != CollectiveKind::Broadcast || r == call.peer) {
    std::memcpy(slot(r), bytes_of(call.in), bytes);
  }
  node_->barrier(seq);
  const DType dtype = call.dtype();
  char* out = bytes_of(call.out);
  switch (call.kind) {
    case CollectiveKind::Broadcast:
      if (r != call.peer) std::memcpy(out, slot(call.peer), bytes);
      break;
    case CollectiveKind::AllGatherIntoTensor:
      for (int q = 0; q < n; ++q) {
        // In place, this rank's block is already where it belongs.
        if (out + q * bytes != bytes_of(call.in)) std::memcpy(out + q * bytes, slot(q), bytes);
      }
      break;
    case CollectiveKind::AllToAllSingle: {
      const size_t block = bytes / static_cast<size_t>(n);
      for (int q = 0; q < n; ++q) std::memcpy(out + q * block, slot(q) + r * block, block);
      break;
    }
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatterTensor: {
      // Every rank reduces in the same order, so all_reduce results agree bit for bit.
      const bool scatter = call.kind == CollectiveKind::ReduceScatterTensor;
      const size_t offset = scatter ? static_cast<size_t>(r) * call.out.nbytes() : 0;
      std::vector<const void*> ins(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) ins[static_cast<size_t>(q)] = slot(q) + offset;
      reduce_n(dtype, call.op, out, ins.data(), n, call.out.numel());
      break;
    }
    default:
      TS_INTERNAL_ASSERT(false, "no shared-memory path for ", call.name());
  }
  return true;
}

}  // namespace tessera::dist::detail
