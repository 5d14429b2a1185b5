// Note [Choosing a redistribute plan]
// Candidates, each a list of steps that change one mesh dim at a time:
//  - PyTorch's greedy order (torch _redistribute.py): right to left, move each mesh dim to its
//    target, or to Replicate when a shard of the same tensor dim must be undone first; then left
//    to right to the targets. S(d) -> S(e) becomes one all_to_all.
//  - the general order, always valid, also for StridedShard: right to left, gather every shard
//    that does not keep its layout; then left to right, chunk / reduce / partition to the target.
// A step is valid when the mesh dim it changes is the innermost one sharding its tensor dim
// (gathering or chunking an outer shard would mix the inner chunks). Then, in each candidate,
// consecutive all_gathers (inner to outer), all_reduces (same op) or reduce_scatters (outer to
// inner) over contiguous mesh dims merge into one collective over their flattened group:
// [S(0), S(0)] -> [R, R] on 2x2 is one all_gather over 4 ranks instead of two. The cheapest plan
// under the cost model wins; PyTorch's order is among the candidates, so the plan is never worse
// than it under the model.

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>
#include <tuple>

#include "tessera/collectives/dist.h"
#include "tessera/dtensor/redistribute/cost_model.h"
#include "tessera/dtensor/redistribute/plan.h"
#include "tessera/runtime/error.h"

namespace tessera::dtensor {

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::AllGather:
      return "all_gather";
    case StepKind::AllToAll:
      return "all_to_all";
    case StepKind::Chunk:
      return "chunk (local)";
    case StepKind::AllReduce:
      return "all_reduce";
    case StepKind::ReduceScatter:
      return "reduce_scatter";
    case StepKind::Partition:
      return "partition (local)";
    case StepKind::Keep:
      return "keep (mesh dim of size 1)";
  }
  return "?";
}

std::string RedistributePlan::to_string() const {
  std::ostringstream os;
  if (steps.empty()) os << "  (no steps: placements already equal)\n";
  for (const RedistributeStep& s : steps) {
    os << "  mesh dims " << fmt::format("[{}]", fmt::join(s.mesh_dims, ",")) << ": "
       << tessera::to_string(s.from) << " -> " << tessera::to_string(s.to) << "  "
       << step_kind_name(s.kind) << "\n";
  }
  os << fmt::format("  estimated {:.1f} us, {} bytes on the wire per rank", cost_s * 1e6,
                    bytes_per_rank);
  return os.str();
}

namespace {

using Steps = std::vector<RedistributeStep>;

StepKind kind_of(const Placement& from, const Placement& to) {
  if (from.is_shard()) return to.is_replicate() ? StepKind::AllGather : StepKind::AllToAll;
  if (from.is_replicate()) return to.is_shard() ? StepKind::Chunk : StepKind::Partition;
  return to.is_replicate() ? StepKind::AllReduce : StepKind::ReduceScatter;
}

void check_partition(const Placement& to, const Placements& target) {
  const dist::ReduceOp op = to.reduce_op();
  const bool ok = op == dist::ReduceOp::Sum || op == dist::ReduceOp::Avg ||
                  op == dist::ReduceOp::Min || op == dist::ReduceOp::Max;
  TS_CHECK(ok, "[redistribute] Replicate to ", to, " (target ", target,
           ") is not supported: a replicated value cannot be split into partial ", op,
           " values; only sum, avg, min and max partials can be made from Replicate");
}

// Appends the steps that move mesh dim m of `cur` to `to`, through Replicate where no single
// collective does it (S -> P, P(a) -> P(b), and S -> S involving a StridedShard).
void emit(Steps& steps, Placements& cur, int64_t m, const Placement& to, const Placements& target,
          const Shape& mesh_shape) {
  const Placement from = cur[static_cast<size_t>(m)];
  if (from == to) return;
  const bool via_replicate =
      (from.is_shard() && to.is_partial()) || (from.is_partial() && to.is_partial()) ||
      (from.is_shard() && to.is_shard() && (from.is_strided_shard() || to.is_strided_shard()));
  if (via_replicate) {
    emit(steps, cur, m, Replicate(), target, mesh_shape);
    emit(steps, cur, m, to, target, mesh_shape);
    return;
  }
  if (to.is_partial()) check_partition(to, target);
  RedistributeStep step;
  step.kind = mesh_shape[m] == 1 ? StepKind::Keep : kind_of(from, to);
  step.mesh_dims = {m};
  step.from = cur;
  cur[static_cast<size_t>(m)] = to;
  step.to = cur;
  steps.push_back(std::move(step));
}

bool shards_dim_after(const Placements& ps, int64_t m, int64_t dim) {
  for (size_t i = static_cast<size_t>(m) + 1; i < ps.size(); ++i) {
    if (ps[i].is_shard(dim)) return true;
  }
  return false;
}

bool valid(const RedistributeStep& s) {
  const int64_t m = s.mesh_dims.back();
  const Placement& from = s.from[static_cast<size_t>(m)];
  const Placement& to = s.to[static_cast<size_t>(m)];
  switch (s.kind) {
    case StepKind::AllGather:
      return !shards_dim_after(s.from, m, from.dim());
    case StepKind::Chunk:
    case StepKind::ReduceScatter:
      return !shards_dim_after(s.to, m, to.dim());
    case StepKind::AllToAll:
      return !shards_dim_after(s.from, m, from.dim()) && !shards_dim_after(s.to, m, to.dim());
    default:
      return true;
  }
}

Steps greedy_plan(const DTensorSpec& src, const Placements& dst) {
  const Shape& mesh_shape = src.mesh.shape();
  const int64_t nd = static_cast<int64_t>(dst.size());
  Placements cur = src.placements;
  Steps steps;
  if (src.num_shards() > 1) {
    for (int64_t m = nd - 1; m >= 0; --m) {
      Placement t = dst[static_cast<size_t>(m)];
      if (t.is_shard()) {
        for (int64_t i = 0; i < m; ++i) {
          if (cur[static_cast<size_t>(i)].is_shard(t.dim()) !=
              dst[static_cast<size_t>(i)].is_shard(t.dim())) {
            t = Replicate();
            break;
          }
        }
      }
      emit(steps, cur, m, t, dst, mesh_shape);
    }
  }
  for (int64_t m = 0; m < nd; ++m)
    emit(steps, cur, m, dst[static_cast<size_t>(m)], dst, mesh_shape);
  return steps;
}

// Whether mesh dim m of src already has its target layout: same placement, and every earlier
// mesh dim sharding the same tensor dim unchanged.
bool keeps_layout(const Placements& src, const Placements& dst, int64_t m) {
  const Placement& p = src[static_cast<size_t>(m)];
  if (p != dst[static_cast<size_t>(m)]) return false;
  if (!p.is_shard()) return true;
  for (int64_t i = 0; i < m; ++i) {
    const Placement& a = src[static_cast<size_t>(i)];
    const Placement& b = dst[static_cast<size_t>(i)];
    if ((a.is_shard(p.dim()) || b.is_shard(p.dim())) && a != b) return false;
  }
  return true;
}

Steps general_plan(const DTensorSpec& src, const Placements& dst) {
  const Shape& mesh_shape = src.mesh.shape();
  const int64_t nd = static_cast<int64_t>(dst.size());
  Placements cur = src.placements;
  Steps steps;
  for (int64_t m = nd - 1; m >= 0; --m) {
    if (cur[static_cast<size_t>(m)].is_shard() && !keeps_layout(src.placements, dst, m)) {
      emit(steps, cur, m, Replicate(), dst, mesh_shape);
    }
  }
  for (int64_t m = 0; m < nd; ++m)
    emit(steps, cur, m, dst[static_cast<size_t>(m)], dst, mesh_shape);
  return steps;
}

// Whether b can join a (a merged step so far) as one collective over a flattened group.
bool can_merge(const RedistributeStep& a, const RedistributeStep& b, const DeviceMesh& mesh) {
  if (a.kind != b.kind || b.mesh_dims.size() != 1) return false;
  const int64_t m = b.mesh_dims[0];
  const auto at = [](const Placements& ps, int64_t i) { return ps[static_cast<size_t>(i)]; };
  std::vector<int64_t> dims = a.mesh_dims;
  switch (a.kind) {
    case StepKind::AllGather: {
      // Inner to outer, plain shards of one tensor dim.
      if (m + 1 != a.mesh_dims.front()) return false;
      const Placement& pa = at(a.from, a.mesh_dims.front());
      const Placement& pb = at(b.from, m);
      if (pa.is_strided_shard() || pb.is_strided_shard() || pa != pb) return false;
      dims.insert(dims.begin(), m);
      break;
    }
    case StepKind::AllReduce:
      if (m + 1 != a.mesh_dims.front() && m != a.mesh_dims.back() + 1) return false;
      if (at(a.from, a.mesh_dims.front()) != at(b.from, m)) return false;
      dims.push_back(m);
      std::sort(dims.begin(), dims.end());
      break;
    case StepKind::ReduceScatter: {
      // Outer to inner, same reduce op, plain shards of one tensor dim.
      if (m != a.mesh_dims.back() + 1) return false;
      if (at(a.from, a.mesh_dims.back()) != at(b.from, m)) return false;
      const Placement& ta = at(a.to, a.mesh_dims.back());
      const Placement& tb = at(b.to, m);
      if (ta.is_strided_shard() || tb.is_strided_shard() || ta != tb) return false;
      dims.push_back(m);
      break;
    }
    default:
      return false;
  }
  return mesh.flattened_group(dims) != nullptr;
}

Steps merge_flattened(const Steps& steps, const DeviceMesh& mesh) {
  Steps out;
  for (const RedistributeStep& s : steps) {
    if (!out.empty() && can_merge(out.back(), s, mesh)) {
      RedistributeStep& m = out.back();
      m.mesh_dims.push_back(s.mesh_dims[0]);
      std::sort(m.mesh_dims.begin(), m.mesh_dims.end());
      m.to = s.to;
      continue;
    }
    out.push_back(s);
  }
  return out;
}

// Keep steps change nothing locally; they stay out of plans.
Steps drop_keeps(Steps steps) {
  std::erase_if(steps, [](const RedistributeStep& s) { return s.kind == StepKind::Keep; });
  return steps;
}

RedistributePlan price(const DTensorSpec& src, Steps steps) {
  RedistributePlan plan;
  const CostModel& model = cost_model();
  for (const RedistributeStep& s : steps) {
    const StepCost c = step_cost(src, s, model);
    plan.cost_s += c.seconds;
    plan.bytes_per_rank += c.wire_bytes;
  }
  plan.steps = std::move(steps);
  return plan;
}

RedistributePlan make_plan(const DTensorSpec& src, const Placements& dst) {
  std::vector<Steps> candidates;
  for (Steps s : {greedy_plan(src, dst), general_plan(src, dst)}) {
    bool ok = true;
    for (const RedistributeStep& step : s) ok = ok && valid(step);
    if (!ok) continue;
    s = drop_keeps(std::move(s));
    candidates.push_back(merge_flattened(s, src.mesh));
    candidates.push_back(std::move(s));
  }
  TS_INTERNAL_ASSERT(!candidates.empty(), "no valid redistribute plan from ", src.placements,
                     " to ", dst);
  RedistributePlan best;
  bool have = false;
  for (Steps& s : candidates) {
    RedistributePlan p = price(src, std::move(s));
    // Strictly cheaper only: earlier candidates (PyTorch's order first) win ties.
    if (!have || p.cost_s < best.cost_s) {
      best = std::move(p);
      have = true;
    }
  }
  return best;
}

// TESSERA_LOGS=dtensor (or +dtensor): log_plan_use prints.
bool logging_plans() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_LOGS");
    return v != nullptr && std::string_view(v).find("dtensor") != std::string_view::npos;
  }();
  return on;
}

struct PlanKey {
  Shape mesh;
  uint64_t flattened;
  Shape shape;
  DType dtype;
  std::string src;
  std::string dst;
  bool operator<(const PlanKey& o) const {
    return std::tie(mesh, flattened, shape, dtype, src, dst) <
           std::tie(o.mesh, o.flattened, o.shape, o.dtype, o.src, o.dst);
  }
};

// Every field in full: a split factor or dim above 127 must not collide with a small one.
std::string encode(const Placements& ps) {
  std::string s;
  for (const Placement& p : ps) {
    s += fmt::format("{}:{}:{}:{};", static_cast<int>(p.kind()), p.is_shard() ? p.dim() : 0,
                     p.is_shard() ? p.split_factor() : 0,
                     p.is_partial() ? static_cast<int>(p.reduce_op()) : 0);
  }
  return s;
}

dist::detail::CallContext agreement_of(const DTensorSpec& src, const Placements& dst) {
  return dist::detail::make_call_context(
      fmt::format("redistribute|{}|{}|{}|{}|{}", fmt::join(src.mesh.shape(), ","),
                  fmt::join(src.shape, ","), static_cast<int>(src.dtype), encode(src.placements),
                  encode(dst)),
      fmt::format("redistribute of a {} DTensor of shape {} from {} to {}", dtype_name(src.dtype),
                  src.shape, tessera::to_string(src.placements), tessera::to_string(dst)));
}

}  // namespace

const RedistributePlan& plan_redistribute(const DTensorSpec& src, const Placements& dst) {
  // Per thread: ranks of the threads backend plan concurrently without locks.
  thread_local std::map<PlanKey, RedistributePlan> cache;
  thread_local uint64_t cache_version = 0;
  if (cache_version != cost_model_version()) {
    cache.clear();
    cache_version = cost_model_version();
  }
  PlanKey key{src.mesh.shape(), src.mesh.flattened_groups_mask(), src.shape,
              src.dtype,        encode(src.placements),           encode(dst)};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  RedistributePlan& plan = cache.emplace(std::move(key), make_plan(src, dst)).first->second;
  plan.agreement = agreement_of(src, dst);
  return plan;
}

void log_plan_use(const RedistributePlan& plan, PlanUse use) {
  if (!logging_plans()) return;
  bool& logged = use == PlanUse::kPriced ? plan.logged_priced : plan.logged_issued;
  if (logged) return;
  logged = true;
  const std::string tag = dist::is_initialized()
                              ? fmt::format("[tessera dtensor rank {}] ", dist::world()->rank())
                              : std::string("[tessera dtensor] ");
  std::string text =
      tag +
      (use == PlanUse::kPriced ? "priced (weighed by a placement choice, not issued): "
                               : "issued: ") +
      *plan.agreement.description + ":\n" + plan.to_string();
  // Every line tagged, and one write: ranks' lines do not interleave within a plan.
  for (size_t at = text.find('\n'); at != std::string::npos && at + 1 < text.size();
       at = text.find('\n', at + 1)) {
    text.insert(at + 1, tag);
  }
  text += '\n';
  std::fputs(text.c_str(), stderr);
}

}  // namespace tessera::dtensor
