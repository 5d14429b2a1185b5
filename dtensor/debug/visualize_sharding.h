#pragma once
// visualize_sharding (torch.distributed.tensor.debug.visualize_sharding): draws which ranks hold
// which block of a 1-D or 2-D DTensor, computed from its spec alone (no communication). Returns
// the drawing on every rank and prints it on the mesh's first rank.
//
//   Placements [S(0), S(1)] on mesh [2, 2], shape [4, 4]
//          col 0:2   col 2:4
//   row 0:2  rank 0    rank 1
//   row 2:4  rank 2    rank 3

#include <string>

#include "tessera/dtensor/dtensor.h"

namespace tessera::debug {

std::string visualize_sharding(const DTensor& dt, const std::string& header = "");

}  // namespace tessera::debug
