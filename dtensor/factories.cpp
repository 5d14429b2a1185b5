#include "tessera/dtensor/factories.h"

#include <memory>

#include "tessera/dtensor/generator_sync.h"
#include "tessera/dtensor/local_layout.h"
#include "tessera/dtensor/redistribute/runs.h"
#include "tessera/runtime/ops.h"
#include "tessera/runtime/ops/random_runs.h"

namespace tessera::dtensor {

namespace {

std::shared_ptr<DTensorSpec> spec_of(const char* op, const Shape& shape,
                                     const FactoryOptions& options) {
  TS_CHECK(options.mesh.has_value(), "[", op, "] needs a mesh: pass {.mesh = mesh, ...}");
  for (int64_t s : shape) {
    TS_CHECK_SHAPE(s >= 0, "[", op, "] negative dimension ", s, " in shape ", shape);
  }
  Placements ps = options.placements;
  if (ps.empty()) ps.assign(static_cast<size_t>(options.mesh->ndim()), Replicate());
  ps = normalize_placements(op, ps, *options.mesh, static_cast<int64_t>(shape.size()));
  for (const Placement& p : ps) {
    const bool ok = !p.is_partial() || p.is_partial(dist::ReduceOp::Sum) ||
                    p.is_partial(dist::ReduceOp::Avg) || p.is_partial(dist::ReduceOp::Min) ||
                    p.is_partial(dist::ReduceOp::Max);
    TS_CHECK(ok, "[", op, "] ", p, " cannot hold a factory's values; use sum, avg, min or max");
  }
  return std::make_shared<DTensorSpec>(
      DTensorSpec{*options.mesh, ps, shape, contiguous_strides(shape), options.dtype});
}

// The local tensor's values of the logical tensor under Partial placements (see factories.h),
// then wrapped as a leaf.
DTensor finish(Tensor local, std::shared_ptr<DTensorSpec> spec, bool requires_grad) {
  const std::vector<int64_t> coord = spec->coordinate();
  for (size_t m = 0; m < spec->placements.size(); ++m) {
    if (spec->placements[m].is_partial(dist::ReduceOp::Sum) && coord[m] != 0) local.zero_();
  }
  if (requires_grad) local.requires_grad_();
  return DTensor(std::move(local), std::move(spec));
}

DTensor random_factory(const char* op, const Shape& shape, const FactoryOptions& options,
                       Generator* gen, detail::RandomFill kind) {
  auto spec = spec_of(op, shape, options);
  TS_CHECK_DTYPE(is_floating_point(options.dtype), "[", op,
                 "] expects a floating-point dtype, got ", options.dtype);
  // Note [Random ops on distributed tensors] (runtime/ops/random.cpp): the rank draws only the
  // counters of its elements.
  agree_generator(spec->mesh, gen != nullptr ? *gen : default_generator());
  Tensor local = Tensor::make_empty(spec->local_shape(), options.dtype, Device::cpu());
  detail::fill_random_runs(local, kind, global_row_runs(*spec, spec->coordinate()), shape.numel(),
                           gen);
  return finish(std::move(local), std::move(spec), options.requires_grad);
}

// A 1-D sequence: the rank's elements of the single-device one.
DTensor sequence_factory(const char* op, const Tensor& global, const FactoryOptions& options) {
  auto spec = spec_of(op, global.sizes(), options);
  const auto runs = spec->global_runs(spec->coordinate());
  Tensor local = assemble_runs(0, runs[0], {RunSource{global, {Run{0, global.size(0)}}}}).clone();
  return finish(std::move(local), std::move(spec), options.requires_grad);
}

}  // namespace

DTensor empty(const Shape& shape, const FactoryOptions& options) {
  auto spec = spec_of("dtensor::empty", shape, options);
  Tensor local = Tensor::make_empty(spec->local_shape(), options.dtype, Device::cpu());
  if (options.requires_grad) local.requires_grad_();
  return DTensor(std::move(local), std::move(spec));
}

DTensor zeros(const Shape& shape, const FactoryOptions& options) { return full(shape, 0, options); }

DTensor ones(const Shape& shape, const FactoryOptions& options) { return full(shape, 1, options); }

DTensor full(const Shape& shape, const Scalar& value, const FactoryOptions& options) {
  auto spec = spec_of("dtensor::full", shape, options);
  Tensor local = tessera::full(spec->local_shape(), value, options.dtype);
  return finish(std::move(local), std::move(spec), options.requires_grad);
}

DTensor rand(const Shape& shape, const FactoryOptions& options, Generator* gen) {
  return random_factory("dtensor::rand", shape, options, gen, detail::RandomFill::kUniform);
}

DTensor randn(const Shape& shape, const FactoryOptions& options, Generator* gen) {
  return random_factory("dtensor::randn", shape, options, gen, detail::RandomFill::kNormal);
}

DTensor linspace(double start, double end, int64_t steps, const FactoryOptions& options) {
  return sequence_factory("dtensor::linspace", tessera::linspace(start, end, steps, options.dtype),
                          options);
}

DTensor logspace(double start, double end, int64_t steps, double base,
                 const FactoryOptions& options) {
  return sequence_factory("dtensor::logspace",
                          tessera::logspace(start, end, steps, base, options.dtype), options);
}

}  // namespace tessera::dtensor
