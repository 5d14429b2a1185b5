#pragma once
// ReduceOp: how all_reduce / reduce_scatter combine the ranks' values (torch.distributed.ReduceOp).

#include <fmt/format.h>

#include <cstdint>
#include <ostream>
#include <string_view>

#include "tessera/runtime/dtype.h"

namespace tessera::dist {

// Sum, Avg (Sum divided by the group size; floating dtypes only), Min, Max, Product, and the
// bitwise BAnd, BOr, BXor (integral and bool dtypes only). Half and BFloat16 reduce in float and
// round once. On bool, Sum and Max are logical or, Product and Min logical and (as NCCL).
enum class ReduceOp : uint8_t { Sum, Avg, Min, Max, Product, BAnd, BOr, BXor };

// "sum", "avg", "min", "max", "product", "band", "bor", "bxor".
std::string_view reduce_op_name(ReduceOp op);

// Throws Error naming `op_name` when `op` is not defined for `dtype` (Avg on integers, bitwise
// ops on floating types).
void check_reduce_op(const char* op_name, ReduceOp op, DType dtype);

std::ostream& operator<<(std::ostream& os, ReduceOp op);

}  // namespace tessera::dist

template <>
struct fmt::formatter<tessera::dist::ReduceOp> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(tessera::dist::ReduceOp op, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tessera::dist::reduce_op_name(op), ctx);
  }
};
