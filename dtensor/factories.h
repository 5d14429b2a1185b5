#pragma once
// DTensor factories (torch.distributed.tensor.zeros / ones / empty / full / rand / randn, and
// linspace / logspace): each rank allocates only its local shard.
//
// The logical tensor is the one the matching single-device factory makes: Partial(sum) puts the
// values on coordinate 0 of its mesh dim and zeros on the others, Partial(avg/min/max) everywhere.
// rand / randn are bitwise equal to the single-device rand / randn with the same Generator state
// (see Note [Philox counter layout] in kernels/cpu/random.cpp): each shard draws the counters of
// its own elements, and every rank advances the generator past the whole tensor, so ranks stay in
// step, as PyTorch's offset-based RNG tracker keeps them.

#include <optional>

#include "tessera/dtensor/dtensor.h"
#include "tessera/runtime/generator.h"
#include "tessera/runtime/scalar.h"

namespace tessera::dtensor {

struct FactoryOptions {
  std::optional<DeviceMesh> mesh = std::nullopt;  // required
  Placements placements = {};                     // default: all Replicate
  DType dtype = kFloat32;
  bool requires_grad = false;
};

DTensor empty(const Shape& shape, const FactoryOptions& options);
DTensor zeros(const Shape& shape, const FactoryOptions& options);
DTensor ones(const Shape& shape, const FactoryOptions& options);
DTensor full(const Shape& shape, const Scalar& value, const FactoryOptions& options);
// Uniform in [0, 1) / standard normal; gen defaults to the calling rank's default generator,
// which must be seeded identically on every rank.
DTensor rand(const Shape& shape, const FactoryOptions& options, Generator* gen = nullptr);
DTensor randn(const Shape& shape, const FactoryOptions& options, Generator* gen = nullptr);
DTensor linspace(double start, double end, int64_t steps, const FactoryOptions& options);
DTensor logspace(double start, double end, int64_t steps, double base,
                 const FactoryOptions& options);

}  // namespace tessera::dtensor
