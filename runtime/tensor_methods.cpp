// Method forms of the free ops of runtime/ops.h (API.md §1, as libtorch's Tensor methods): each is
// a one-line forward to the free function with *this as its first argument. The free functions
// are named fully qualified: inside the class the method names would shadow them.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/ops.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

// ---- elementwise ----
Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const {
  return tessera::add(*this, other, alpha);
}
Tensor Tensor::add(const Scalar& other) const { return tessera::add(*this, other); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const {
  return tessera::sub(*this, other, alpha);
}
Tensor Tensor::sub(const Scalar& other) const { return tessera::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return tessera::mul(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return tessera::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return tessera::div(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return tessera::div(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return tessera::pow(*this, exponent); }
Tensor Tensor::pow(const Scalar& exponent) const { return tessera::pow(*this, exponent); }
Tensor Tensor::maximum(const Tensor& other) const { return tessera::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return tessera::minimum(*this, other); }

// ---- comparisons and logical ----
Tensor Tensor::eq(const Tensor& other) const { return tessera::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return tessera::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return tessera::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return tessera::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return tessera::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return tessera::ge(*this, other); }
Tensor Tensor::logical_and(const Tensor& other) const { return tessera::logical_and(*this, other); }
Tensor Tensor::logical_or(const Tensor& other) const { return tessera::logical_or(*this, other); }
Tensor Tensor::logical_not() const { return tessera::logical_not(*this); }

// ---- unary ----
Tensor Tensor::neg() const { return tessera::neg(*this); }
Tensor Tensor::abs() const { return tessera::abs(*this); }
Tensor Tensor::exp() const { return tessera::exp(*this); }
Tensor Tensor::log() const { return tessera::log(*this); }
Tensor Tensor::sqrt() const { return tessera::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tessera::rsqrt(*this); }
Tensor Tensor::relu() const { return tessera::relu(*this); }
Tensor Tensor::gelu(const std::string& approximate) const {
  return tessera::gelu(*this, approximate);
}
Tensor Tensor::silu() const { return tessera::silu(*this); }
Tensor Tensor::tanh() const { return tessera::tanh(*this); }
Tensor Tensor::sigmoid() const { return tessera::sigmoid(*this); }
Tensor Tensor::erf() const { return tessera::erf(*this); }
Tensor Tensor::erfc() const { return tessera::erfc(*this); }

// ---- selection ----
// torch.Tensor.where(condition, other): this where condition holds.
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return tessera::where(condition, *this, other);
}
Tensor Tensor::clamp(std::optional<Scalar> min_value, std::optional<Scalar> max_value) const {
  return tessera::clamp(*this, std::move(min_value), std::move(max_value));
}

// ---- reductions ----
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim,
                   std::optional<DType> dtype) const {
  return tessera::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::prod(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::prod(*this, dims, keepdim);
}
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::mean(*this, dims, keepdim);
}
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::amin(*this, dims, keepdim);
}
Tensor Tensor::max() const { return tessera::max(*this); }
Tensor Tensor::min() const { return tessera::min(*this); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return tessera::max(*this, dim, keepdim);
}
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return tessera::min(*this, dim, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return tessera::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return tessera::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(const std::vector<int64_t>& dims, double correction, bool keepdim) const {
  return tessera::var(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(double p, const std::vector<int64_t>& dims, bool keepdim) const {
  return tessera::norm(*this, p, dims, keepdim);
}

// ---- linear algebra ----
Tensor Tensor::matmul(const Tensor& other) const { return tessera::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return tessera::mm(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return tessera::bmm(*this, other); }

// ---- nn functions ----
Tensor Tensor::softmax(int64_t dim) const { return tessera::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return tessera::log_softmax(*this, dim); }

}  // namespace tessera
