#pragma once

namespace tessera::bench {
// Prints section 3 of dtensor_ops_bench: rand_like, randn_like and dropout of a [2048, 1024]
// float32 DTensor on mesh [4] (S(0), S(1), R) and [2, 2] ([S(0), S(1)]), each rank's draw beside
// the single-device draw of the whole tensor and of a tensor of the local shard's size, and the
// GB/s written beside memcpy of the same bytes.
void run_random_draws_section();
}  // namespace tessera::bench
