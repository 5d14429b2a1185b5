#include "dtensor/redistribute/cost_model.h"

#include <algorithm>
#include <atomic>
#include <mutex>

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
}  // namespace

const LinkCost& CostModel::link(int64_t mesh_dim) const {
  return mesh_dim < static_cast<int64_t>(per_mesh_dim.size())
             ? per_mesh_dim[static_cast<size_t>(mesh_dim)]
             : fallback;
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
  double alpha = 0.0;
  double beta = 0.0;
  for (int64_t m : step.mesh_dims) {
    group *= spec.mesh.size(m);
    alpha = std::max(alpha, model.link(m).alpha_s);
    beta = std::max(beta, model.link(m).beta_s_per_byte);
  }
  const int64_t in = local_bytes(spec, step.from);
  const int64_t out = local_bytes(spec, step.to);
  const double n = static_cast<double>(group);
  auto collective = [&](double rounds, int64_t bytes) {
    const double wire = rounds * static_cast<double>(bytes) * (n - 1) / n;
    return StepCost{model.call_s + alpha * (n - 1) * rounds + beta * wire,
                    static_cast<int64_t>(2 * wire)};
  };
  switch (step.kind) {
    case StepKind::AllGather:
      return collective(1, out);
    case StepKind::AllToAll:
    case StepKind::ReduceScatter:
      return collective(1, in);
    case StepKind::AllReduce:
      return collective(2, in);
    case StepKind::Chunk:
    case StepKind::Partition:
      return StepCost{static_cast<double>(out) / model.local_bytes_per_s, 0};
    case StepKind::Keep:
      return StepCost{};
  }
  return StepCost{};
}

}  // namespace tessera::dtensor
