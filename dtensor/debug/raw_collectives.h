#pragma once
// The raw collectives behind a redistribute plan, for benchmarks that time a redistribute beside
// what its communication alone costs: one callable per communicating step, issuing that step's
// collective on the same group with preallocated buffers of one size on every rank (the largest
// shard, the dim its step shards padded to a multiple of the group, as the redistribute pads an
// uneven split).

#include <functional>
#include <vector>

#include "tessera/dtensor/redistribute/plan.h"

namespace tessera::debug {

std::vector<std::function<void()>> raw_collectives(const DTensorSpec& src,
                                                   const dtensor::RedistributePlan& plan);

}  // namespace tessera::debug
