#include "tessera/dtensor/debug/raw_collectives.h"

#include <memory>

#include "tessera/runtime/ops.h"

namespace tessera::debug {

namespace {

// A collective's members must pass buffers of one size, and with uneven shards each rank's own
// shard differs, so every buffer is sized from the shard at the mesh's first coordinate (the
// largest: torch.chunk gives the first chunks the extra rows), padded as the redistribute's own
// equal-size collectives pad: the dim a step shards or unshards rounded up to a multiple of the
// group's size.
Shape largest_shard(const DTensorSpec& spec) {
  return spec.local_shape(std::vector<int64_t>(static_cast<size_t>(spec.mesh.ndim()), 0));
}

int64_t padded_numel(Shape shape, int64_t dim, int64_t n) {
  auto& size = shape[static_cast<size_t>(dim)];
  size = (size + n - 1) / n * n;
  return shape.numel();
}

std::function<void()> raw_step(const DTensorSpec& src, const dtensor::RedistributeStep& step) {
  DTensorSpec from = src;
  from.placements = step.from;
  DTensorSpec to = src;
  to.placements = step.to;
  const dist::ProcessGroupPtr group = src.mesh.flattened_group(step.mesh_dims);
  const int64_t n = group->size();
  const auto first = static_cast<size_t>(step.mesh_dims[0]);
  const Shape from_shard = largest_shard(from);
  auto buffer = [&](int64_t numel) { return std::make_shared<Tensor>(zeros({numel}, src.dtype)); };
  switch (step.kind) {
    case dtensor::StepKind::AllGather: {
      auto in = buffer(from_shard.numel());
      auto out = buffer(from_shard.numel() * n);
      return [=] { group->all_gather_into_tensor(*out, *in)->wait(); };
    }
    case dtensor::StepKind::AllToAll: {
      const int64_t numel = padded_numel(from_shard, step.to[first].dim(), n);
      auto in = buffer(numel);
      auto out = buffer(numel);
      return [=] { group->all_to_all_single(*out, *in)->wait(); };
    }
    case dtensor::StepKind::AllReduce: {
      // Out of place, as the step runs it: a redistribute leaves its input intact.
      auto in = buffer(from_shard.numel());
      auto out = buffer(from_shard.numel());
      const dist::ReduceOp op = step.from[first].reduce_op();
      return [=] { group->all_reduce_into(*out, *in, op)->wait(); };
    }
    case dtensor::StepKind::ReduceScatter: {
      const int64_t numel = padded_numel(from_shard, step.to[first].dim(), n);
      auto in = buffer(numel);
      auto out = buffer(numel / n);
      const dist::ReduceOp op = step.from[first].reduce_op();
      return [=] { group->reduce_scatter_tensor(*out, *in, op)->wait(); };
    }
    default:
      return nullptr;
  }
}

}  // namespace

std::vector<std::function<void()>> raw_collectives(const DTensorSpec& src,
                                                   const dtensor::RedistributePlan& plan) {
  std::vector<std::function<void()>> out;
  for (const dtensor::RedistributeStep& step : plan.steps) {
    if (auto f = raw_step(src, step)) out.push_back(std::move(f));
  }
  return out;
}

}  // namespace tessera::debug
