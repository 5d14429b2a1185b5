#pragma once
// Kernel tables: op entry points in runtime/ops/ validate arguments, compute result shapes and
// dtypes, allocate outputs, then call the kernel of the tensors' device through this table.
// kernels/cpu and kernels/cuda fill their table in one explicit registration function each
// (see detail::install_kernels). Kernels may assume what each comment promises.

#include <cstdint>
#include <vector>

#include "tessera/runtime/op_table.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // in units of 128-bit Philox outputs (4 x uint32)
};

struct KernelTable {
  // dst and src have equal shapes; any dtypes (converted), any strides (may overlap only if equal).
  void (*copy)(const Tensor& dst, const Tensor& src) = nullptr;
  void (*fill)(const Tensor& dst, const Scalar& value) = nullptr;

  // out and in have equal shapes and dtypes; in may be strided.
  void (*unary)(UnaryOp op, const Tensor& out, const Tensor& in) = nullptr;
  // a and b have out's shape (broadcast dims have stride 0) and the same dtype (the compute
  // dtype); out has that dtype, or kBool for comparisons.
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
  // cond (kBool), a, b have out's shape and a, b out's dtype.
  void (*where)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = nullptr;
  // out = min(max(in, lo), hi); has_lo / has_hi say which bound applies. Same shape and dtype.
  void (*clamp)(const Tensor& out, const Tensor& in, const Scalar& lo, bool has_lo,
                const Scalar& hi, bool has_hi) = nullptr;

  // out = the gradient of one input of a pointwise op (PointwiseGradOp in runtime/op_table.h says
  // what x, y, p0 and p1 hold). grad, x and y have out's shape (broadcast dims have stride 0) and
  // dtype, floating (float16 / bfloat16 computed in float32); y is undefined unless op takes two
  // operands. Any strides.
  void (*pointwise_grad)(PointwiseGradOp op, const Tensor& out, const Tensor& grad, const Tensor& x,
                         const Tensor& y, double p0, double p1) = nullptr;

  // out has in's shape with each reduced dim of size 1 (keepdim form), contiguous. `dims` sorted,
  // unique, non-empty. For kVar, `param` is the correction; for kNorm it is p (inf allowed).
  // kArgmax/kArgmin reduce exactly one dim and write kInt64.
  void (*reduce)(ReductionOp op, const Tensor& out, const Tensor& in,
                 const std::vector<int64_t>& dims, double param) = nullptr;

  // a [batch..., M, K], b [batch..., K, N] with equal (already broadcast) batch dims, any strides;
  // out [batch..., M, N] contiguous; all three of one floating or integral dtype.
  void (*matmul)(const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
  // out = a @ b + bias as matmul, bias [N] (out's last dim, contiguous, out's dtype) added to
  // every row in the product's own pass. Returns false, computing nothing, where the backend
  // does not fuse it: the caller then runs matmul and adds the bias. May be null.
  bool (*matmul_bias)(const Tensor& out, const Tensor& a, const Tensor& b,
                      const Tensor& bias) = nullptr;

  // Along `dim` of in (same shape/dtype as out, floating). log selects log_softmax.
  void (*softmax)(const Tensor& out, const Tensor& in, int64_t dim, bool log) = nullptr;
  // Normalizes over the last `norm_ndim` dims of in. weight/bias may be undefined. mean and rstd
  // (contiguous, float32 or float64, shape = leading dims) receive the statistics for backward.
  void (*layer_norm)(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                     const Tensor& weight, const Tensor& bias, int64_t norm_ndim,
                     double eps) = nullptr;
  // As layer_norm without centering or bias; rstd receives 1/rms.
  void (*rms_norm)(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                   int64_t norm_ndim, double eps) = nullptr;
  // The backward kernels of softmax, the norms and cross_entropy, one pass over their operands
  // (Note [Fused nn backward] in runtime/ops/nn_backward.cpp). A device without them leaves
  // them null, and the backward formulas compose ops instead.
  //
  // Input gradient of softmax (log: log_softmax) along dim from its result y: y * (grad -
  // sum(grad * y)), or grad - exp(y) * sum(grad). out, grad, y: equal shapes, one floating dtype,
  // any strides.
  void (*softmax_backward)(const Tensor& out, const Tensor& grad, const Tensor& y, int64_t dim,
                           bool log) = nullptr;
  // Gradients of layer_norm (mean defined) or rms_norm (mean undefined) over the trailing dims,
  // from the forward's statistics (contiguous, float32 or float64, one per row): with
  // xhat = (in - mean) * rstd and gw = grad * weight, grad_in = rstd * (gw - mean(gw) - xhat *
  // mean(gw * xhat)) (rms_norm: without mean(gw)), grad_weight = sum over rows of grad * xhat,
  // grad_bias = sum over rows of grad. grad and in: contiguous, equal shapes, one floating
  // dtype; weight undefined or the normalized shape, any floating dtype and strides. Each output
  // may be undefined (not wanted); grad_in contiguous of in's shape and dtype, grad_weight and
  // grad_bias contiguous of the normalized shape, any floating dtype. Row sums are blocked by
  // shape, not thread count, so results do not depend on the number of threads.
  void (*norm_backward)(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                        const Tensor& grad, const Tensor& in, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) = nullptr;
  // Gradient of cross_entropy on logits [N, C] (contiguous, floating; out the same) against
  // target [N] (int64, contiguous): out[i] = (softmax(logits[i]) - q[i]) * grad[i] * scale,
  // q[i] = label_smoothing / C everywhere plus 1 - label_smoothing at the target class; rows
  // whose target is ignore_index get 0. grad: contiguous, logits' dtype, [N] or 0-dim (one
  // value for every row).
  void (*cross_entropy_backward)(const Tensor& out, const Tensor& logits, const Tensor& target,
                                 const Tensor& grad, double scale, int64_t ignore_index,
                                 double label_smoothing) = nullptr;
  // out[i, :] = weight[indices[i], :]; indices int32/int64 already validated in range, flattened.
  void (*embedding)(const Tensor& out, const Tensor& weight, const Tensor& indices) = nullptr;
  // out[indices[i], :] += grad[i, :] for each i in order (repeated indices accumulate): out
  // [V, D] contiguous, of grad's accumulation dtype (float32, float64 for float64 grad); grad
  // [n, D] floating, any strides; indices as embedding's.
  void (*embedding_backward)(const Tensor& out, const Tensor& grad,
                             const Tensor& indices) = nullptr;
  // Per-sample loss of log-probabilities logp [N, C] against target [N] (int64), with label
  // smoothing; samples equal to ignore_index get 0 and are not counted. out [N].
  void (*nll_loss)(const Tensor& out, const Tensor& logp, const Tensor& target,
                   int64_t ignore_index, double label_smoothing) = nullptr;

  // Random fills of a contiguous out; element i draws from the counters that Note [Philox
  // counter layout] (kernels/cpu/random.cpp) assigns it. uniform and normal: floating out;
  // randint: low < high, every value of [low, high) representable in out's dtype.
  void (*uniform)(const Tensor& out, PhiloxState state, double low, double high) = nullptr;
  void (*normal)(const Tensor& out, PhiloxState state, double mean, double stddev) = nullptr;
  void (*randint)(const Tensor& out, PhiloxState state, int64_t low, int64_t high) = nullptr;
  // out = in * keep / (1 - p), keep = (uniform draw i < 1 - p); 0 <= p <= 1, and p == 1 draws
  // nothing (out = in * 0). out contiguous with in's shape and floating dtype; in any strides.
  void (*dropout)(const Tensor& out, const Tensor& in, PhiloxState state, double p) = nullptr;
  // out[i] = start + i * step (contiguous out, any dtype).
  void (*arange)(const Tensor& out, double start, double step) = nullptr;
};

// The table of a device type; throws DeviceError if that device has no kernels in this build.
const KernelTable& kernels(DeviceType device, const char* op);
inline const KernelTable& kernels_for(const Tensor& t, const char* op) {
  return kernels(t.device().type(), op);
}

namespace detail {
// Defined in kernels/register.cpp: fills `table` for `device`; returns false when this build has
// no kernels for it. Called once per device type.
bool install_kernels(DeviceType device, KernelTable& table);
// The table kernels() returns, writable, for set_cpu_isa (runtime/cpu_isa.h) to re-register the
// CPU ISA variant families. Writes are not synchronized with ops that read the table.
KernelTable& mutable_kernels(DeviceType device);
}  // namespace detail

// Calls f(T{}) with T the C++ type of dtype (bool, uint8_t, int32_t, int64_t, Half, BFloat16,
// float, double).
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
#define TS_VISIT_CASE(e, T, name) \
  case DType::e:                  \
    return f(T{});
    TS_FOR_EACH_DTYPE(TS_VISIT_CASE)
#undef TS_VISIT_CASE
  }
  return f(float{});
}

}  // namespace tessera
