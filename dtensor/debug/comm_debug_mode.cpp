#include "tessera/dtensor/debug/comm_debug_mode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "tessera/collectives/process_group.h"

namespace tessera::debug {

CommDebugMode::CommDebugMode() {
  guard_ = std::make_unique<dist::CollectiveObserverGuard>([this](const dist::CollectiveEvent& e) {
    if (e.kind == dist::CollectiveKind::Split) return;
    Event ev;
    ev.name = e.kind == dist::CollectiveKind::AllGather
                  ? std::string("all_gather_into_tensor")
                  : std::string(dist::collective_name(e.kind));
    ev.group_size = e.group != nullptr ? e.group->size() : 0;
    if (e.group != nullptr) ev.group = e.group->world_ranks();
    ev.bytes = e.bytes;
    ev.dtype = e.dtype.has_value() ? fmt::format("{}", *e.dtype) : "";
    ev.op = e.op.has_value() ? std::string(dist::reduce_op_name(*e.op)) : "";
    events_.push_back(std::move(ev));
  });
}

CommDebugMode::~CommDebugMode() = default;

std::map<std::string, int64_t> CommDebugMode::get_comm_counts() const {
  std::map<std::string, int64_t> counts;
  for (const Event& e : events_) ++counts[e.name];
  return counts;
}

std::map<std::string, int64_t> CommDebugMode::get_comm_bytes() const {
  std::map<std::string, int64_t> bytes;
  for (const Event& e : events_) bytes[e.name] += e.bytes;
  return bytes;
}

int64_t CommDebugMode::get_total_counts() const { return static_cast<int64_t>(events_.size()); }

int64_t CommDebugMode::count(const std::string& name) const {
  int64_t n = 0;
  for (const Event& e : events_) n += e.name == name ? 1 : 0;
  return n;
}

std::string CommDebugMode::tracing_table() const {
  std::ostringstream os;
  // The group by its world ranks: on a mesh, which mesh dim (and which slice of it) it is.
  std::vector<std::string> groups;
  size_t width = 5;
  for (const Event& e : events_) {
    groups.push_back(fmt::format("[{}]", fmt::join(e.group, ", ")));
    width = std::max(width, groups.back().size());
  }
  os << fmt::format("{:>4}  {:<24} {:>6} {:<{}} {:>14}  {:<9} {}\n", "#", "collective", "ranks",
                    "group", width, "bytes", "dtype", "op");
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    os << fmt::format("{:>4}  {:<24} {:>6} {:<{}} {:>14}  {:<9} {}\n", i, e.name, e.group_size,
                      groups[i], width, e.bytes, e.dtype, e.op);
  }
  os << fmt::format("total: {} collectives\n", events_.size());
  return os.str();
}

std::string CommDebugMode::json() const {
  std::ostringstream os;
  os << "{\"counts\": {";
  bool first = true;
  for (const auto& [name, n] : get_comm_counts()) {
    os << (first ? "" : ", ") << "\"" << name << "\": " << n;
    first = false;
  }
  os << "}, \"trace\": [";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    os << (i == 0 ? "" : ", ")
       << fmt::format(
              "{{\"collective\": \"{}\", \"ranks\": {}, \"group\": [{}], \"bytes\": {}, "
              "\"dtype\": \"{}\", \"op\": \"{}\"}}",
              e.name, e.group_size, fmt::join(e.group, ", "), e.bytes, e.dtype, e.op);
  }
  os << "]}";
  return os.str();
}

}  // namespace tessera::debug
