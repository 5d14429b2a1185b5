#include "tessera/collectives/reduce_op.h"

#include "tessera/runtime/error.h"

namespace tessera::dist {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Product:
      return "product";
    case ReduceOp::BAnd:
      return "band";
    case ReduceOp::BOr:
      return "bor";
    case ReduceOp::BXor:
      return "bxor";
  }
  return "unknown";
}

void check_reduce_op(const char* op_name, ReduceOp op, DType dtype) {
  const bool bitwise = op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor;
  TS_CHECK_DTYPE(!bitwise || is_integral(dtype, /*include_bool=*/true), "[", op_name,
                 "] the bitwise reduce op ", reduce_op_name(op),
                 " needs an integral or bool dtype, got ", dtype);
  TS_CHECK_DTYPE(
      op != ReduceOp::Avg || is_floating_point(dtype), "[", op_name,
      "] ReduceOp::Avg needs a floating dtype (float16, bfloat16, float32, float64), got ", dtype,
      "; reduce with Sum and divide instead");
}

std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << reduce_op_name(op); }

}  // namespace tessera::dist
