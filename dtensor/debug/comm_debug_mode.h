#pragma once
// CommDebugMode (torch.distributed.tensor.debug.CommDebugMode): counts the collectives the calling
// rank issues while the guard lives — those of DTensor code, forward and backward, and any other.
// An all_gather of uneven shards (list form) counts as all_gather_into_tensor, as PyTorch counts
// DTensor's gathers whatever the padding.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/collectives/observer.h"

namespace tessera::debug {

class CommDebugMode {
 public:
  CommDebugMode();
  ~CommDebugMode();
  CommDebugMode(const CommDebugMode&) = delete;
  CommDebugMode& operator=(const CommDebugMode&) = delete;

  // Collective name ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
  // "all_to_all_single", "broadcast", ...) -> number issued.
  std::map<std::string, int64_t> get_comm_counts() const;
  int64_t get_total_counts() const;
  // Collective name -> bytes issued (the message sizes of collectives/observer.h, summed).
  std::map<std::string, int64_t> get_comm_bytes() const;
  // The count of one collective name (0 when none).
  int64_t count(const std::string& name) const;
  // One line per collective in issue order: index, name, group size, the group's world ranks,
  // bytes, dtype, reduce op.
  std::string tracing_table() const;
  // The counts and the trace as JSON.
  std::string json() const;

 private:
  struct Event {
    std::string name;
    int group_size = 0;
    std::vector<int> group;  // world ranks
    int64_t bytes = 0;
    std::string dtype;
    std::string op;
  };
  std::vector<Event> events_;
  std::unique_ptr<dist::CollectiveObserverGuard> guard_;
};

}  // namespace tessera::debug
