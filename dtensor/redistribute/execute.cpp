// Each step kind's data movement. Every step works from the global index runs each group member
// holds before and after the step (dtensor/sharding.h), so uneven shards, nested shards and
// StridedShard need no special cases; the common layouts (the moved dim outermost, equal chunks)
// take fast paths where the collective writes straight into the output.

#include "tessera/dtensor/redistribute/execute.h"

#include "tessera/dtensor/redistribute/runs.h"
#include "tessera/runtime/ops.h"

namespace tessera::dtensor {

namespace {

struct StepContext {
  DTensorSpec from;
  DTensorSpec to;
  int64_t mesh_dim = 0;  // the first (outermost) changed mesh dim
  dist::ProcessGroupPtr group;
  std::vector<std::vector<int64_t>> members;  // coordinates, in group rank order
  std::vector<int64_t> me;
  dist::CollectiveOptions options;
};

StepContext context_of(const DTensorSpec& src, const RedistributeStep& step, bool async_op) {
  StepContext c{src, src, 0, nullptr, {}, {}, {}};
  c.from.placements = step.from;
  c.to.placements = step.to;
  c.mesh_dim = step.mesh_dims.front();
  c.me = src.coordinate();
  c.group = src.mesh.flattened_group(step.mesh_dims);
  c.options.async_op = async_op;
  int64_t count = 1;
  for (int64_t m : step.mesh_dims) count *= src.mesh.size(m);
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> coord = c.me;
    int64_t rest = i;
    for (auto it = step.mesh_dims.rbegin(); it != step.mesh_dims.rend(); ++it) {
      coord[static_cast<size_t>(*it)] = rest % src.mesh.size(*it);
      rest /= src.mesh.size(*it);
    }
    c.members.push_back(std::move(coord));
  }
  TS_INTERNAL_ASSERT(c.group != nullptr && c.group->size() == count, "redistribute: no group of ",
                     count, " ranks for the step's mesh dims");
  return c;
}

const Placement& from_placement(const StepContext& c) {
  return c.from.placements[static_cast<size_t>(c.mesh_dim)];
}
const Placement& to_placement(const StepContext& c) {
  return c.to.placements[static_cast<size_t>(c.mesh_dim)];
}

// Runs without empty ones, consecutive ones joined: two lists of runs describe the same sequence
// of global indices exactly when their joined forms are equal.
std::vector<Run> joined(const std::vector<std::vector<Run>>& parts) {
  std::vector<Run> out;
  for (const auto& runs : parts) {
    for (const Run& r : runs) {
      if (r.size == 0) continue;
      if (!out.empty() && out.back().offset + out.back().size == r.offset) {
        out.back().size += r.size;
      } else {
        out.push_back(r);
      }
    }
  }
  return out;
}

// Whether the parts, one after the other, are exactly `whole` in its order. Order matters: the
// members of a StridedShard hold interleaved runs ([0, 2), [4, 6) and [2, 4), [6, 8)), which cover
// [0, 8) but do not concatenate to it.
bool concatenate_to(const std::vector<std::vector<Run>>& parts, const std::vector<Run>& whole) {
  return joined(parts) == joined({whole});
}

bool leading_dims_are_one(const Shape& shape, int64_t dim) {
  for (int64_t i = 0; i < dim; ++i) {
    if (shape[static_cast<size_t>(i)] != 1) return false;
  }
  return true;
}

// The n equal blocks of t along dim d as one view [n, ...] whose block k is t.narrow(d, k * w, w):
// collectives read and write such views in place (Note [Strided tensors in collectives]).
Tensor blocks_along(const Tensor& t, int64_t d, int64_t n) {
  Shape split = t.sizes();
  split[static_cast<size_t>(d)] /= n;
  split.insert(split.begin() + d, n);
  Shape order{d};
  for (int64_t i = 0; i < static_cast<int64_t>(split.size()); ++i) {
    if (i != d) order.push_back(i);
  }
  return t.view(split).permute(order);
}

// Whether every member's part has the same size (so the parts are equal blocks).
bool equal_sizes(const std::vector<std::vector<Run>>& parts) {
  for (const auto& runs : parts) {
    if (total_size(runs) != total_size(parts.front())) return false;
  }
  return true;
}

// A result that owns its storage (never a view of the step's input).
Tensor owned(const Tensor& result, const Tensor& input) {
  return result.is_alias_of(input) ? result.clone() : result.contiguous();
}

Tensor gather(const Tensor& local, const StepContext& c, dist::WorkPtr& pending,
              std::vector<Tensor>& keep_alive) {
  const int64_t d = from_placement(c).dim();
  const std::vector<Run> want = c.to.global_runs(c.me)[static_cast<size_t>(d)];
  std::vector<std::vector<Run>> member_runs;
  std::vector<Shape> member_shapes;
  for (const auto& m : c.members) {
    member_runs.push_back(c.from.global_runs(m)[static_cast<size_t>(d)]);
    member_shapes.push_back(c.from.local_shape(m));
  }
  const Tensor& in = local;
  keep_alive.push_back(in);
  const Shape out_shape = c.to.local_shape(c.me);
  if (concatenate_to(member_runs, want)) {
    // The members' shards follow each other along d: each lands straight in its block of the
    // result (a strided block when d is not the outermost dim).
    Tensor out = Tensor::make_empty(out_shape, local.dtype(), local.device());
    bool equal = true;
    for (const Shape& s : member_shapes) equal = equal && s == member_shapes[0];
    if (equal) {
      const auto n = static_cast<int64_t>(c.members.size());
      pending = c.group->all_gather_into_tensor(blocks_along(out, d, n), in, c.options);
      return out;
    }
    std::vector<Tensor> outs;
    int64_t offset = 0;
    for (const Shape& s : member_shapes) {
      outs.push_back(out.narrow(d, offset, s[static_cast<size_t>(d)]));
      offset += s[static_cast<size_t>(d)];
    }
    pending = c.group->all_gather(outs, in, c.options);
    return out;
  }
  std::vector<RunSource> sources;
  std::vector<Tensor> outs;
  for (size_t k = 0; k < c.members.size(); ++k) {
    outs.push_back(Tensor::make_empty(member_shapes[k], local.dtype(), local.device()));
    sources.push_back(RunSource{outs.back(), member_runs[k]});
  }
  c.group->all_gather(outs, in)->wait();
  return assemble_runs(d, want, sources).contiguous();
}

Tensor all_to_all(const Tensor& local, const StepContext& c) {
  const int64_t d = from_placement(c).dim();
  const int64_t e = to_placement(c).dim();
  const auto my_from = c.from.global_runs(c.me);
  const auto my_to = c.to.global_runs(c.me);
  std::vector<std::vector<Run>> parts_sent;      // along e: what each member gets of my shard
  std::vector<std::vector<Run>> parts_received;  // along d: what each member held
  for (const auto& m : c.members) {
    parts_sent.push_back(c.to.global_runs(m)[static_cast<size_t>(e)]);
    parts_received.push_back(c.from.global_runs(m)[static_cast<size_t>(d)]);
  }
  const auto n = static_cast<int64_t>(c.members.size());
  if (equal_sizes(parts_sent) && concatenate_to(parts_sent, my_from[static_cast<size_t>(e)]) &&
      equal_sizes(parts_received) &&
      concatenate_to(parts_received, my_to[static_cast<size_t>(d)])) {
    // Equal blocks on both sides: the collective reads each block along e of the shard and writes
    // each block along d of the result where they lie.
    Tensor out = Tensor::make_empty(c.to.local_shape(c.me), local.dtype(), local.device());
    c.group->all_to_all_single(blocks_along(out, d, n), blocks_along(local, e, n))->wait();
    return out;
  }
  // Pack: the part of this rank's shard that member j holds afterwards, straight into block j of
  // one send buffer.
  std::vector<Tensor> send_pieces;
  std::vector<int64_t> in_splits;
  std::vector<int64_t> out_splits;
  std::vector<Shape> recv_shapes;
  int64_t send_total = 0;
  for (size_t j = 0; j < c.members.size(); ++j) {
    send_pieces.push_back(
        assemble_runs(e, parts_sent[j], {RunSource{local, my_from[static_cast<size_t>(e)]}}));
    in_splits.push_back(send_pieces.back().numel());
    send_total += in_splits.back();
    Shape shape = c.from.local_shape(c.members[j]);
    shape[static_cast<size_t>(e)] = total_size(my_to[static_cast<size_t>(e)]);
    out_splits.push_back(shape.numel());
    recv_shapes.push_back(std::move(shape));
  }
  const Tensor send = Tensor::make_empty({send_total}, local.dtype(), local.device());
  int64_t offset = 0;
  for (size_t j = 0; j < send_pieces.size(); ++j) {
    send.narrow(0, offset, in_splits[j]).view(send_pieces[j].sizes()).copy_(send_pieces[j]);
    offset += in_splits[j];
  }
  int64_t total = 0;
  for (int64_t count : out_splits) total += count;
  const Tensor recv = Tensor::make_empty({total}, local.dtype(), local.device());
  c.group->all_to_all_single(recv, send, out_splits, in_splits)->wait();
  const Shape out_shape = c.to.local_shape(c.me);
  // Blocks that follow each other along an outermost dim d already are the result.
  if (concatenate_to(parts_received, my_to[static_cast<size_t>(d)]) &&
      leading_dims_are_one(out_shape, d)) {
    return recv.view(out_shape);
  }
  std::vector<RunSource> sources;
  offset = 0;
  for (size_t k = 0; k < c.members.size(); ++k) {
    sources.push_back(
        RunSource{recv.narrow(0, offset, out_splits[k]).view(recv_shapes[k]), parts_received[k]});
    offset += out_splits[k];
  }
  return owned(assemble_runs(d, my_to[static_cast<size_t>(d)], sources), recv);
}

// `as_view`: the next step reads the chunk where it lies (a collective into a new tensor), so a
// view of this rank's part is enough; otherwise the result gets storage of its own.
Tensor chunk(const Tensor& local, const StepContext& c, bool as_view) {
  const int64_t d = to_placement(c).dim();
  const std::vector<Run> have = c.from.global_runs(c.me)[static_cast<size_t>(d)];
  const std::vector<Run> want = c.to.global_runs(c.me)[static_cast<size_t>(d)];
  const Tensor part = assemble_runs(d, want, {RunSource{local, have}});
  return as_view ? part : owned(part, local);
}

// Whether a step writes a new tensor from its input by a collective, reading strided inputs in
// place (Note [Strided tensors in collectives]).
bool reads_input_in_place(StepKind kind) {
  return kind == StepKind::AllGather || kind == StepKind::AllToAll ||
         kind == StepKind::ReduceScatter;
}

Tensor all_reduce(const Tensor& local, const StepContext& c, dist::WorkPtr& pending,
                  std::vector<Tensor>& keep_alive) {
  Tensor out = Tensor::make_empty(local.sizes(), local.dtype(), local.device());
  keep_alive.push_back(local.contiguous());
  pending =
      c.group->all_reduce_into(out, keep_alive.back(), from_placement(c).reduce_op(), c.options);
  return out;
}

Tensor reduce_scatter(const Tensor& local, const StepContext& c, dist::WorkPtr& pending,
                      std::vector<Tensor>& keep_alive) {
  const int64_t d = to_placement(c).dim();
  const dist::ReduceOp op = from_placement(c).reduce_op();
  const std::vector<Run> have = c.from.global_runs(c.me)[static_cast<size_t>(d)];
  std::vector<std::vector<Run>> member_want;
  int64_t widest = 0;
  bool equal = true;
  for (const auto& m : c.members) {
    member_want.push_back(c.to.global_runs(m)[static_cast<size_t>(d)]);
    const int64_t s = total_size(member_want.back());
    equal = equal && (member_want.size() == 1 || s == widest);
    widest = std::max(widest, s);
  }
  const Shape out_shape = c.to.local_shape(c.me);
  if (equal && concatenate_to(member_want, have)) {
    Tensor out = Tensor::make_empty(out_shape, local.dtype(), local.device());
    keep_alive.push_back(local);
    pending = c.group->reduce_scatter_tensor(
        out, blocks_along(local, d, static_cast<int64_t>(c.members.size())), op, c.options);
    return out;
  }
  // Block k of the input: member k's part, padded along d to the widest part (the padding only
  // meets padding, and is cut off after).
  Shape block = local.sizes();
  block[static_cast<size_t>(d)] = widest;
  const int64_t block_numel = block.numel();
  const int64_t n = static_cast<int64_t>(c.members.size());
  const Tensor buffer = Tensor::make_empty({n * block_numel}, local.dtype(), local.device());
  for (int64_t k = 0; k < n; ++k) {
    const Tensor part =
        assemble_runs(d, member_want[static_cast<size_t>(k)], {RunSource{local, have}});
    const Tensor dest = buffer.narrow(0, k * block_numel, block_numel).view(block);
    dest.narrow(d, 0, part.size(d)).copy_(part);
    if (part.size(d) < widest) dest.narrow(d, part.size(d), widest - part.size(d)).zero_();
  }
  const Tensor out = Tensor::make_empty(block, local.dtype(), local.device());
  c.group->reduce_scatter_tensor(out, buffer, op)->wait();
  return owned(out.narrow(d, 0, out_shape[static_cast<size_t>(d)]), buffer);
}

Tensor partition(const Tensor& local, const StepContext& c) {
  // Sum: one rank keeps the value and the others hold zeros, so that reducing gives it back
  // exactly (PyTorch divides by the group size, which rounds). Avg, min, max: every rank keeps it.
  if (to_placement(c).reduce_op() == dist::ReduceOp::Sum &&
      c.me[static_cast<size_t>(c.mesh_dim)] != 0) {
    return zeros_like(local);
  }
  return local;
}

}  // namespace

ExecuteResult execute_plan(const Tensor& local, const DTensorSpec& src,
                           const RedistributePlan& plan, bool async_op) {
  ExecuteResult result{local, nullptr, {}};
  log_plan_use(plan, PlanUse::kIssued);
  const dist::detail::CallContextScope scope(plan.agreement);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const RedistributeStep& step = plan.steps[i];
    const bool last = i + 1 == plan.steps.size();
    const StepContext c = context_of(src, step, async_op && last);
    dist::WorkPtr pending;
    switch (step.kind) {
      case StepKind::AllGather:
        result.local = gather(result.local, c, pending, result.keep_alive);
        break;
      case StepKind::AllToAll:
        result.local = all_to_all(result.local, c);
        break;
      case StepKind::Chunk:
        result.local =
            chunk(result.local, c, !last && reads_input_in_place(plan.steps[i + 1].kind));
        break;
      case StepKind::AllReduce:
        result.local = all_reduce(result.local, c, pending, result.keep_alive);
        break;
      case StepKind::ReduceScatter:
        result.local = reduce_scatter(result.local, c, pending, result.keep_alive);
        break;
      case StepKind::Partition:
        result.local = partition(result.local, c);
        break;
      case StepKind::Keep:
        break;
    }
    if (pending != nullptr && !(async_op && last)) {
      pending->wait();
      pending = nullptr;
    }
    if (pending == nullptr) result.keep_alive.clear();
    result.pending = std::move(pending);
  }
  return result;
}

}  // namespace tessera::dtensor
