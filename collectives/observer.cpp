#include "tessera/collectives/observer.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera::dist {

namespace {

struct Registered {
  uint64_t id;
  CollectiveObserver fn;
};

// Per thread: each rank of the threads backend is a thread (DESIGN.md: no hidden state across
// ranks).
thread_local std::vector<Registered> t_observers;
thread_local uint64_t t_next_id = 0;

}  // namespace

std::string_view collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return "all_reduce";
    case CollectiveKind::AllGatherIntoTensor:
      return "all_gather_into_tensor";
    case CollectiveKind::AllGather:
      return "all_gather";
    case CollectiveKind::ReduceScatterTensor:
      return "reduce_scatter_tensor";
    case CollectiveKind::AllToAllSingle:
      return "all_to_all_single";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::Scatter:
      return "scatter";
    case CollectiveKind::Gather:
      return "gather";
    case CollectiveKind::Send:
      return "send";
    case CollectiveKind::Recv:
      return "recv";
    case CollectiveKind::Barrier:
      return "barrier";
    case CollectiveKind::Split:
      return "split";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, CollectiveKind kind) {
  return os << collective_name(kind);
}

CollectiveObserverGuard::CollectiveObserverGuard(CollectiveObserver observer) : id_(t_next_id++) {
  t_observers.push_back({id_, std::move(observer)});
}

CollectiveObserverGuard::~CollectiveObserverGuard() {
  std::erase_if(t_observers, [this](const Registered& r) { return r.id == id_; });
}

namespace detail {

void notify_observers(const CollectiveEvent& event) {
  if (t_observers.empty()) return;
  // A snapshot: an observer may add or remove observers while being notified.
  const std::vector<Registered> observers = t_observers;
  for (const Registered& r : observers) r.fn(event);
}

}  // namespace detail
}  // namespace tessera::dist
