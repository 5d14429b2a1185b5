#pragma once
// Tensor: a strided view of a Storage. Cheap to copy (shares the implementation); views share the
// storage of their base. See runtime/ops.h for the free-function ops.

#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "tessera/runtime/dtype.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/scalar.h"
#include "tessera/runtime/shape.h"
#include "tessera/runtime/storage.h"
#include "tessera/runtime/tensor_options.h"

namespace tessera {

namespace autograd {
class Node;
}  // namespace autograd

// Slot for the autograd layer: the runtime only carries it (autograd/ defines what is inside).
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
  // A leaf marked requires_grad, or the output of a recorded op (see runtime/autograd_hooks.h).
  virtual bool requires_grad() const = 0;
};

// Slot for dtensor/: set on distributed tensors (see runtime/distributed.h).
struct DistributedMetaBase;

// Options of Tensor::backward (torch.Tensor.backward's keyword arguments).
struct BackwardOptions {
  // Keep the graph's saved tensors for another backward; defaults to create_graph.
  std::optional<bool> retain_graph = std::nullopt;
  // Record the backward pass itself, for higher-order derivatives.
  bool create_graph = false;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kFloat32;
  bool contiguous = true;
  std::shared_ptr<AutogradMetaBase> autograd_meta;
  // Set on a distributed tensor (a DTensor): its sizes, strides and dtype are the global
  // tensor's and its data is the local shard inside (Note [Distributed dispatch]).
  std::shared_ptr<DistributedMetaBase> dist_meta;

  void refresh_contiguous();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Fresh, uninitialized contiguous tensor. Checks the shape (checked_numel) and its byte size,
  // naming `op` in the ShapeError.
  static Tensor make_empty(const Shape& sizes, DType dtype, Device device,
                           const char* op = "empty");
  // A view of `storage` with the given geometry (no bounds check beyond an internal assert).
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape sizes, Shape strides,
                          int64_t offset, DType dtype);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& shape() const { return impl().sizes; }
  int64_t size(int64_t d) const;
  const Shape& strides() const { return impl().strides; }
  int64_t stride(int64_t d) const;
  int64_t storage_offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  TensorOptions options() const { return TensorOptions().dtype(dtype()).device(device()); }
  bool is_contiguous() const { return impl().contiguous; }
  size_t element_size() const { return tessera::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  // Whether both tensors view the same storage.
  bool is_alias_of(const Tensor& other) const { return storage() == other.storage(); }
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  // A DTensor (a shard of a global tensor over a DeviceMesh); see dtensor/dtensor.h.
  bool is_distributed() const { return impl_ != nullptr && impl_->dist_meta != nullptr; }

  // ---- data ----
  // Pointer to the first element (CPU only); T must match dtype(), or be void. A DTensor has no
  // single data pointer: to_local() or full_tensor() first.
  template <typename T>
  T* data_ptr() const;
  void* raw_data() const;
  template <typename T>
  T item() const;
  Scalar item() const;
  template <typename T>
  std::vector<T> to_vector() const;

  // The whole tensor: full_tensor() of a DTensor (a collective: every rank of its mesh calls it),
  // the tensor itself otherwise.
  Tensor full_tensor() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor clone() const;
  Tensor contiguous() const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_() { return fill_(Scalar(int64_t{0})); }

  // ---- views (no copy) ----
  Tensor view(const Shape& sizes) const;
  Tensor reshape(const Shape& sizes) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const Shape& sizes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- method forms of the free ops of runtime/ops.h (runtime/tensor_methods.cpp) ----
  // x.op(args...) == tessera::op(x, args...), as libtorch's Tensor methods (API.md §1).
  // elementwise
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor relu() const;
  Tensor gelu(const std::string& approximate = "none") const;
  Tensor silu() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor erf() const;
  Tensor erfc() const;
  // As torch.Tensor.where: this where `condition` holds, `other` elsewhere.
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor clamp(std::optional<Scalar> min_value,
               std::optional<Scalar> max_value = std::nullopt) const;
  // reductions
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false,
             std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims = {}, double correction = 1,
             bool keepdim = false) const;
  Tensor norm(double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  // linear algebra
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  // nn functions
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- in-place arithmetic (see runtime/ops.h for out-of-place) ----
  Tensor& operator+=(const Tensor& other);
  Tensor& operator-=(const Tensor& other);
  Tensor& operator*=(const Tensor& other);
  Tensor& operator/=(const Tensor& other);
  Tensor& operator+=(const Scalar& other);
  Tensor& operator-=(const Scalar& other);
  Tensor& operator*=(const Scalar& other);
  Tensor& operator/=(const Scalar& other);

  // ---- autograd (defined in autograd/tensor_autograd.cpp; see autograd/README.md) ----
  bool requires_grad() const;
  // Marks a leaf as requiring gradients. Errors: a non-floating dtype; false on a non-leaf.
  const Tensor& requires_grad_(bool requires_grad = true) const;
  // The accumulated gradient (undefined until a backward reaches this leaf or retained non-leaf).
  Tensor grad() const;
  Tensor& mutable_grad() const;
  void set_grad(const Tensor& grad) const;
  // Backpropagates from this tensor into the .grad() of the leaves it depends on. `gradient` may be
  // omitted only for a one-element tensor. Errors: the tensor does not require grad; a second
  // backward through freed saved tensors without retain_graph.
  void backward(const Tensor& gradient = {}, BackwardOptions options = {}) const;
  // Same storage and geometry, out of the graph (requires_grad false).
  Tensor detach() const;
  // No grad_fn: created by the user, or not requiring grad.
  bool is_leaf() const;
  // fn(grad) runs when the gradient of this tensor is computed; a defined result replaces it.
  void register_hook(std::function<Tensor(const Tensor&)> fn) const;
  // Keep the gradient of this non-leaf in .grad() on backward (a no-op for leaves).
  void retain_grad() const;
  bool retains_grad() const;
  // The node that computes this tensor's gradient inputs; null for leaves.
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Index of this tensor among its grad_fn's outputs.
  uint32_t output_nr() const;

 private:
  const TensorImpl& impl() const {
    TS_CHECK(impl_ != nullptr, "[Tensor] operation on an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

namespace detail {
// The check every write into an existing tensor makes before writing (copy_, fill_, the in-place
// binary ops): Error naming `op` when t's storage is read-only (imported from DLPack with the
// read-only flag, runtime/interop.h) or when two of its indices reach one memory location (a
// dim of stride 0, as expand makes).
void check_writable(const Tensor& t, const char* op);
}  // namespace detail

// ---- template definitions ----

template <typename T>
T* Tensor::data_ptr() const {
  if constexpr (!std::is_void_v<T>) {
    TS_CHECK_DTYPE(dtype_of<std::remove_const_t<T>> == dtype(), "[data_ptr] requested ",
                   dtype_of<std::remove_const_t<T>>, " but the tensor is ", dtype());
  }
  return static_cast<T*>(raw_data());
}

template <typename T>
T Tensor::item() const {
  return item().to<T>();
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  // A DTensor gives the whole tensor's values (as torch's tolist).
  Tensor c = (is_distributed() ? full_tensor() : *this).to(dtype_of<T>).cpu().contiguous();
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}

}  // namespace tessera

template <>
struct fmt::formatter<tessera::Tensor> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tessera::Tensor& t, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "{}", tessera::detail::concat_message(t));
  }
};
