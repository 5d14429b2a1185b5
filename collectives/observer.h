#pragma once
// Collective observers: a per-rank hook told about every collective a rank issues. CommDebugMode
// counts through it and the sharding-strategy benchmark measures communication volume with it.

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string_view>

#include "tessera/collectives/reduce_op.h"
#include "tessera/runtime/dtype.h"

namespace tessera::dist {

class ProcessGroup;

enum class CollectiveKind : uint8_t {
  AllReduce,
  AllGatherIntoTensor,
  AllGather,
  ReduceScatterTensor,
  AllToAllSingle,
  Broadcast,
  Scatter,
  Gather,
  Send,
  Recv,
  Barrier,
  Split,  // split / new_group: a collective over the parent group, not reported to observers
};

// The torch.distributed name: "all_reduce", "all_gather_into_tensor", ..., "barrier".
std::string_view collective_name(CollectiveKind kind);
std::ostream& operator<<(std::ostream& os, CollectiveKind kind);

// What a rank issued. `bytes` is the message size as nccl-tests defines it, from the calling
// rank's arguments: the tensor for all_reduce / broadcast / send / recv, the whole gathered
// output for all_gather(_into_tensor) and gather, the whole input for reduce_scatter_tensor,
// all_to_all_single and scatter (on non-root ranks of scatter / gather: the local tensor times
// the group size), 0 for barrier.
struct CollectiveEvent {
  CollectiveKind kind = CollectiveKind::Barrier;
  const ProcessGroup* group = nullptr;
  int64_t bytes = 0;
  std::optional<DType> dtype = std::nullopt;  // absent for barrier
  std::optional<ReduceOp> op = std::nullopt;  // all_reduce and reduce_scatter_tensor only
  bool async_op = false;
};

using CollectiveObserver = std::function<void(const CollectiveEvent&)>;

// Registers `observer` for the calling thread (one rank) for the guard's lifetime (destroy the
// guard on the thread that made it). Observers run on the issuing thread when a collective is
// issued, before it starts, in registration order; an observer that throws fails the call before
// anything is communicated.
class CollectiveObserverGuard {
 public:
  explicit CollectiveObserverGuard(CollectiveObserver observer);
  ~CollectiveObserverGuard();
  CollectiveObserverGuard(const CollectiveObserverGuard&) = delete;
  CollectiveObserverGuard& operator=(const CollectiveObserverGuard&) = delete;

 private:
  uint64_t id_;
};

namespace detail {
// Tells the calling thread's observers about `event`.
void notify_observers(const CollectiveEvent& event);
}  // namespace detail

}  // namespace tessera::dist
