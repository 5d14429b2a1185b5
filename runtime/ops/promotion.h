#pragma once
// torch.result_type for ops that mix tensors and Python-like scalars.
//
// Note [Result type]
// Operands fall in three priority classes: tensors with dims > 0-dim tensors > scalars. Within a
// class dtypes promote with promote_types; across classes a lower class only matters when it is
// of a higher category (bool < integral < floating). So int64 tensor + 1 -> int64, int32 tensor +
// 1.5 -> float32 (a float scalar counts as the default float dtype), float16 tensor + 2.0 ->
// float16, bool tensor + 1 -> int64, int32 [3] + float64 0-dim -> float64, and float32 [3] +
// float64 0-dim -> float32.

#include <optional>

#include "tessera/runtime/dtype.h"
#include "tessera/runtime/scalar.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

// Accumulates operands one at a time; result() is the promoted dtype.
class ResultTypeState {
 public:
  void add(const Tensor& t);
  void add(const Scalar& s);
  // The dtype a dimensioned (dims > 0) or zero-dim tensor operand of dtype `t` contributes.
  void add_dtype(DType t, bool zero_dim);
  DType result() const;

 private:
  // One slot per priority class; empty while no operand of that class was added.
  std::optional<DType> dim_;
  std::optional<DType> zero_dim_;
  std::optional<DType> scalar_;
};

DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);
DType result_type(const Scalar& a, const Tensor& b);

// Whether a value of dtype `from` may be written into a tensor of dtype `to` by an in-place op
// (torch.can_cast): never floating into integral, never non-bool into bool.
bool can_cast(DType from, DType to);

}  // namespace tessera
