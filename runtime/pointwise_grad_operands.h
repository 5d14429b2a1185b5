#pragma once
// How many saved operands a fused pointwise backward op reads (x only, or x and y), from the op
// list in runtime/op_table.h: one definition for the dispatcher and the CPU and CUDA kernels.

#include "tessera/runtime/op_table.h"

namespace tessera {

constexpr int pointwise_grad_operand_count(PointwiseGradOp op) {
  switch (op) {
#define TS_CASE(e, name, operands) \
  case PointwiseGradOp::e:         \
    return operands;
    TS_FOR_EACH_POINTWISE_GRAD_OP(TS_CASE)
#undef TS_CASE
  }
  return 1;
}

}  // namespace tessera
