#include "tessera/dtensor/redistribute/cost_model.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "tessera/collectives/observer.h"

namespace tessera::dtensor {

namespace {
std::mutex& model_mutex() {
  static std::mutex m;
  return m;
}
CostModel& model_storage() {
  static CostModel model;
  return model;
}
std::atomic<uint64_t>& version_storage() {
  static std::atomic<uint64_t> v{0};
  return v;
}

// The average shard's bytes: the same on every rank, so that every rank picks the same plan
// (a rank's own shard size differs under uneven sharding).
int64_t local_bytes(const DTensorSpec& spec, const Placements& placements) {
  DTensorSpec s = spec;
  s.placements = placements;
  return spec.shape.numel() * static_cast<int64_t>(element_size(spec.dtype)) / s.num_shards();
}

std::string line_key(std::string_view collective, int64_t group_size) {
  return std::string(collective) + "/" + std::to_string(group_size);
}

// all_reduce moves its message twice (reduce-scatter, then all-gather); the others once.
double rounds_of(std::string_view collective) {
  return collective == dist::collective_name(dist::CollectiveKind::AllReduce) ? 2.0 : 1.0;
}
}  // namespace

const LinkCost& CostModel::link(int64_t mesh_dim) const {
  return mesh_dim < static_cast<int64_t>(per_mesh_dim.size())
             ? per_mesh_dim[static_cast<size_t>(mesh_dim)]
             : fallback;
}

void CostModel::set_line(std::string_view collective, int64_t group_size,
                         const CollectiveLine& line) {
  measured[line_key(collective, group_size)] = line;
}

const CollectiveLine* CostModel::line(std::string_view collective, int64_t group_size) const {
  const auto it = measured.find(line_key(collective, group_size));
  return it == measured.end() ? nullptr : &it->second;
}

double CostModel::seconds(std::string_view collective, int64_t group_size, int64_t count,
                          int64_t bytes, const std::vector<int64_t>& mesh_dims) const {
  if (const CollectiveLine* measured_line = line(collective, group_size)) {
    return measured_line->seconds(count, bytes);
  }
  double alpha = mesh_dims.empty() ? fallback.alpha_s : 0.0;
  double beta = mesh_dims.empty() ? fallback.beta_s_per_byte : 0.0;
  for (int64_t m : mesh_dims) {
    alpha = std::max(alpha, link(m).alpha_s);
    beta = std::max(beta, link(m).beta_s_per_byte);
  }
  const double n = static_cast<double>(group_size);
  const double rounds = rounds_of(collective);
  return static_cast<double>(count) * (call_s + alpha * (n - 1) * rounds) +
         beta * rounds * static_cast<double>(bytes) * (n - 1) / n;
}

const CostModel& cost_model() {
  std::lock_guard<std::mutex> lock(model_mutex());
  return model_storage();
}

void set_cost_model(const CostModel& model) {
  std::lock_guard<std::mutex> lock(model_mutex());
  model_storage() = model;
  ++version_storage();
}

uint64_t cost_model_version() { return version_storage().load(); }

StepCost step_cost(const DTensorSpec& spec, const RedistributeStep& step, const CostModel& model) {
  int64_t group = 1;
  for (int64_t m : step.mesh_dims) group *= spec.mesh.size(m);
  const int64_t in = local_bytes(spec, step.from);
  const int64_t out = local_bytes(spec, step.to);
  // Priced as CommDebugMode counts the collective: its whole message (the gathered output, the
  // scattered input, the all_to_all's or all_reduce's buffer).
  auto collective = [&](dist::CollectiveKind kind, int64_t message) {
    const std::string_view name = dist::collective_name(kind);
    const double n = static_cast<double>(group);
    const double wire = rounds_of(name) * static_cast<double>(message) * (n - 1) / n;
    return StepCost{model.seconds(name, group, 1, message, step.mesh_dims),
                    static_cast<int64_t>(2 * wire)};
  };
  switch (step.kind) {
    case StepKind::AllGather:
      return collective(dist::CollectiveKind::AllGatherIntoTensor, out);
    case StepKind::AllToAll:
      return collective(dist::CollectiveKind::AllToAllSingle, in);
    case StepKind::ReduceScatter:
      return collective(dist::CollectiveKind::ReduceScatterTensor, in);
    case StepKind::AllReduce:
      return collective(dist::CollectiveKind::AllReduce, in);
    case StepKind::Chunk:
    case StepKind::Partition:
      return StepCost{static_cast<double>(out) / model.local_bytes_per_s, 0};
    case StepKind::Keep:
      return StepCost{};
  }
  return StepCost{};
}

}  // namespace tessera::dtensor
