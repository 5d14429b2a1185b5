#pragma once
// Free-function ops of the runtime (API.md §1). All broadcast per NumPy rules and promote dtypes
// per PyTorch rules. An undefined Tensor passed for an optional argument means "absent".
// Errors: ShapeError / DTypeError / IndexError (all tessera::Error) naming the op and arguments.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/generator.h"
#include "tessera/runtime/op_table.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

// ---- factories (runtime/ops/factories.cpp, runtime/ops/random.cpp) ----
Tensor empty(const Shape& sizes, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
// [start, end) in steps of step; dtype int64 when all arguments are integers, else float32.
// Size ceil((end - start) / step); step 0 or of the wrong sign is an Error. With `options`, an
// integral `end` and the default float32 dtype give int64 (TensorOptions cannot tell a requested
// float32 from the default); pass a DType to force one.
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& end, DType dtype);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              std::optional<DType> dtype = std::nullopt, Device device = Device::cpu());
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});
Tensor logspace(double start, double end, int64_t steps, double base = 10.0,
                TensorOptions options = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {});
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, Device device = Device::cpu());
// Scalar as a 0-dim tensor of its natural dtype (or `dtype`).
Tensor scalar_tensor(const Scalar& value, std::optional<DType> dtype = std::nullopt);

Tensor rand(const Shape& sizes, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randn(const Shape& sizes, TensorOptions options = {}, Generator* gen = nullptr);
// rand / randn of t's shape, dtype and device (a floating dtype). Of a DTensor: a DTensor of t's
// placements (Partial ones Replicate) holding the values rand / randn give the global tensor.
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);
// Integers uniform in [low, high); int64 by default.
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options = kInt64,
               Generator* gen = nullptr);

// ---- elementwise (runtime/ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor relu(const Tensor& a);
// approximate: "none" (erf) or "tanh", as torch.nn.functional.gelu.
Tensor gelu(const Tensor& a, const std::string& approximate = "none");
Tensor silu(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
// The error function and its complement 1 - erf, as torch.erf / torch.erfc (integral and bool
// inputs give float32).
Tensor erf(const Tensor& a);
Tensor erfc(const Tensor& a);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
// Generic entry points used by the named ops and by autograd / DTensor rules.
Tensor unary_op(UnaryOp op, const Tensor& a);
Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b);
// In place: self = op(self, other); other broadcasts to self's shape, result cast to self's dtype
// (an error when the promoted type cannot be cast to it, e.g. int += float).
Tensor& binary_op_(BinaryOp op, Tensor& self, const Tensor& other);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>=(const Tensor& a, const Scalar& b);

// ---- reductions (runtime/ops/reduction.cpp) ----
// Empty `dims` reduces over all dims. sum/prod of integral/bool inputs give int64, as PyTorch.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Maximum over all elements (0-dim).
Tensor max(const Tensor& a);
Tensor min(const Tensor& a);
// Maximum along one dim: (values, int64 indices of the first maximum).
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
// Without dim: index into the flattened tensor.
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction 1 is Bessel's (unbiased), as torch.var's default.
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, double correction = 1,
           bool keepdim = false);
// Vector p-norm over dims (p = 2 by default; inf / -inf allowed).
Tensor norm(const Tensor& a, double p = 2.0, const std::vector<int64_t>& dims = {},
            bool keepdim = false);

// ---- linear algebra (runtime/ops/linalg.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// x @ weight^T + bias, weight [out, in].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// ---- nn functions (runtime/ops/nn.cpp) ----
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// eps absent: torch's default, the dtype's machine epsilon.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
Tensor embedding(const Tensor& weight, const Tensor& indices);
enum class Reduction { None, Mean, Sum };
struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::Mean;
};
// logits [N, C] (or [C]), target int64 [N] (or 0-dim) of class indices.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions options = {});
Tensor dropout(const Tensor& a, double p = 0.5, bool train = true, Generator* gen = nullptr);
// query [..., L, E], key [..., S, E], value [..., S, Ev]; attn_mask bool (true = keep) or additive.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    Generator* gen = nullptr);

// ---- shape (runtime/ops/shape_ops.cpp) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);

// ---- checks (runtime/ops/compare.cpp) ----
// |a - b| <= atol + rtol * |b| elementwise (broadcasting), NaNs unequal unless equal_nan.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
// Same shape and exactly equal elements (dtype may differ, as torch.equal after promotion).
bool equal(const Tensor& a, const Tensor& b);

// ---- threads ----
// Intra-op threads of the calling thread (a rank); default: hardware threads.
void set_num_threads(int n);
int get_num_threads();

// ---- template definitions ----
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, Device device) {
  TS_CHECK_SHAPE(static_cast<int64_t>(values.size()) == sizes.numel(), "[from_vector] got ",
                 values.size(), " values for shape ", sizes, " of ", sizes.numel(), " elements");
  Tensor t = Tensor::make_empty(sizes, dtype_of<T>, Device::cpu());
  T* p = t.data_ptr<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return device.is_cpu() ? t : t.to(device);
}

}  // namespace tessera
