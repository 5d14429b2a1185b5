#include "dtensor/factories.h"

#include <functional>
#include <memory>

#include "dtensor/redistribute/runs.h"
#include "runtime/ops.h"

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

// Calls f(global_flat_index, length, local_flat_index) for every run of consecutive global
// elements (row-major) the rank holds, in local order.
void for_each_segment(const Shape& shape, const std::vector<std::vector<Run>>& runs,
                      const std::function<void(int64_t, int64_t, int64_t)>& f) {
  const Shape strides = contiguous_strides(shape);
  const size_t nd = shape.size();
  if (nd == 0) {
    f(0, 1, 0);
    return;
  }
  int64_t local_index = 0;
  // Depth-first over the runs of the leading dims; the last dim's runs are the segments.
  std::function<void(size_t, int64_t)> walk = [&](size_t d, int64_t base) {
    for (const Run& r : runs[d]) {
      if (d + 1 == nd) {
        if (r.size > 0) f(base + r.offset * strides[d], r.size, local_index);
        local_index += r.size;
        continue;
      }
      for (int64_t i = r.offset; i < r.offset + r.size; ++i) walk(d + 1, base + i * strides[d]);
    }
  };
  walk(0, 0);
}

template <typename Fill>
DTensor random_factory(const char* op, const Shape& shape, const FactoryOptions& options,
                       Generator* gen, const Fill& fill) {
  auto spec = spec_of(op, shape, options);
  TS_CHECK_DTYPE(is_floating_point(options.dtype), "[", op,
                 "] expects a floating-point dtype, got ", options.dtype);
  Generator& g = gen != nullptr ? *gen : default_generator();
  // Note [Philox counter layout]: float64 draws 2 elements per counter, narrower types 4.
  const int64_t per_counter = options.dtype == kFloat64 ? 2 : 4;
  const uint64_t base = g.offset();
  const Shape local_shape = spec->local_shape();
  Tensor local = Tensor::make_empty(local_shape, options.dtype, Device::cpu());
  const Tensor flat = local.view({local.numel()});
  for_each_segment(shape, spec->global_runs(spec->coordinate()),
                   [&](int64_t global, int64_t length, int64_t at) {
                     const int64_t skip = global % per_counter;
                     Generator segment(g.seed());
                     segment.set_offset(base + static_cast<uint64_t>(global / per_counter));
                     const Tensor values = fill(Shape{skip + length}, options.dtype, &segment);
                     flat.narrow(0, at, length).copy_(values.narrow(0, skip, length));
                   });
  // Every rank moves past the whole tensor, as the single-device fill would.
  const int64_t n = shape.numel();
  g.set_offset(base + static_cast<uint64_t>((n + per_counter - 1) / per_counter));
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
  return random_factory(
      "dtensor::rand", shape, options, gen,
      [](const Shape& s, DType dtype, Generator* g) { return tessera::rand(s, dtype, g); });
}

DTensor randn(const Shape& shape, const FactoryOptions& options, Generator* gen) {
  return random_factory(
      "dtensor::randn", shape, options, gen,
      [](const Shape& s, DType dtype, Generator* g) { return tessera::randn(s, dtype, g); });
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
