#pragma once

namespace tessera::bench {
// Prints section 4 of dtensor_ops_bench: what the check of Note [Partial times a factor that is
// not finite] costs. On mesh [4], P(sum) * R of float32 [n] (the factor read once for inf/NaN,
// then the local multiply), beside the local multiply alone, a plain read loop over the factor
// (the check's physical limit) and P(sum) * R where R is not finite (the reduce-first way).
void run_partial_factor_section();
}  // namespace tessera::bench
