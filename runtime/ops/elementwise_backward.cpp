// The entry point of the fused pointwise backward kernels (KernelTable::pointwise_grad).
//
// Note [Fused pointwise backward]
// A backward formula composed of runtime ops reads and writes a full tensor per op: exact GELU's
// took about ten passes (3.9 ms for [256, 1024] float32 against libtorch's 0.2 ms, issue 19). Each
// pointwise op's input gradient is instead one kernel reading grad and the saved operands once
// (PointwiseGradOp lists them). The composite formulas stay, because they record: under
// create_graph, when grad or a saved tensor requires grad, a formula takes the composite path so
// that its result differentiates again; otherwise it calls pointwise_backward, whose result would
// be the same up to rounding. Broadcast inputs are summed back afterwards (sum_to), as before.

#include "runtime/dispatch.h"
#include "runtime/distributed.h"
#include "runtime/ops.h"
#include "runtime/ops/elementwise_grad.h"
#include "runtime/ops/promotion.h"
#include "runtime/pointwise_grad_operands.h"

namespace tessera {

Tensor pointwise_backward(PointwiseGradOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                          double p0, double p1) {
  const char* name = op_name(op);
  const bool two = pointwise_grad_operand_count(op) == 2;
  TS_CHECK(grad.defined() && x.defined() && y.defined() == two, "[", name, "] takes grad, x",
           two ? " and y" : " (and no y)");
  TS_CHECK(!any_distributed(grad, x, y), "[", name,
           "] expects local tensors (backward formulas run on the local shards)");
  ResultTypeState state;
  state.add(grad);
  state.add(x);
  if (two) state.add(y);
  const DType dtype = state.result();
  TS_CHECK_DTYPE(is_floating_point(dtype), "[", name, "] computes in a floating-point dtype, got ",
                 dtype, " from grad of ", grad.dtype(), " and x of ", x.dtype());
  TS_CHECK_T(DeviceError, x.device() == grad.device() && (!two || y.device() == grad.device()), "[",
             name, "] expected all tensors on the same device, got ", grad.device(), " and ",
             x.device());
  Shape shape = broadcast_shapes(grad.sizes(), x.sizes(), name);
  if (two) shape = broadcast_shapes(shape, y.sizes(), name);
  const auto prepare = [&](const Tensor& t) {
    const Tensor c = t.dtype() == dtype ? t : t.to(dtype);
    return c.sizes() == shape ? c : c.expand(shape);
  };
  Tensor out = Tensor::make_empty(shape, dtype, grad.device());
  if (out.numel() == 0) return out;
  kernels_for(out, name).pointwise_grad(op, out, prepare(grad), prepare(x),
                                        two ? prepare(y) : Tensor(), p0, p1);
  return out;
}

}  // namespace tessera
