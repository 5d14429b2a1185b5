#include "dtensor/debug/raw_collectives.h"

#include <memory>

#include "runtime/ops.h"

namespace tessera::debug {

namespace {

std::function<void()> raw_step(const DTensorSpec& src, const dtensor::RedistributeStep& step) {
  DTensorSpec from = src;
  from.placements = step.from;
  DTensorSpec to = src;
  to.placements = step.to;
  const dist::ProcessGroupPtr group = src.mesh.flattened_group(step.mesh_dims);
  const int64_t n = group->size();
  const int64_t in_n = from.local_shape().numel() / n * n;
  const int64_t out_n = to.local_shape().numel() / n * n;
  auto buffer = [&](int64_t numel) { return std::make_shared<Tensor>(zeros({numel}, src.dtype)); };
  switch (step.kind) {
    case dtensor::StepKind::AllGather: {
      auto in = buffer(out_n / n);
      auto out = buffer(out_n);
      return [=] { group->all_gather_into_tensor(*out, *in)->wait(); };
    }
    case dtensor::StepKind::AllToAll: {
      auto in = buffer(in_n);
      auto out = buffer(in_n);
      return [=] { group->all_to_all_single(*out, *in)->wait(); };
    }
    case dtensor::StepKind::AllReduce: {
      // Out of place, as the step runs it: a redistribute leaves its input intact.
      auto in = buffer(from.local_shape().numel());
      auto out = buffer(from.local_shape().numel());
      const dist::ReduceOp op = step.from[static_cast<size_t>(step.mesh_dims[0])].reduce_op();
      return [=] { group->all_reduce_into(*out, *in, op)->wait(); };
    }
    case dtensor::StepKind::ReduceScatter: {
      auto in = buffer(in_n);
      auto out = buffer(in_n / n);
      const dist::ReduceOp op = step.from[static_cast<size_t>(step.mesh_dims[0])].reduce_op();
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
