#pragma once
// Tensor: a strided view of a Storage. Cheap to copy (shares the implementation); views share the
// storage of their base. See runtime/ops.h for the free-function ops.

#include <fmt/format.h>

#include <memory>
#include <ostream>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/scalar.h"
#include "runtime/shape.h"
#include "runtime/storage.h"
#include "runtime/tensor_options.h"

namespace tessera {

// Slot for the autograd layer: the runtime only carries it (autograd/ defines what is inside).
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kFloat32;
  bool contiguous = true;
  std::shared_ptr<AutogradMetaBase> autograd_meta;

  void refresh_contiguous();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Fresh, uninitialized contiguous tensor.
  static Tensor make_empty(const Shape& sizes, DType dtype, Device device);
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

  // ---- data ----
  // Pointer to the first element (CPU only); T must match dtype(), or be void.
  template <typename T>
  T* data_ptr() const;
  void* raw_data() const;
  template <typename T>
  T item() const;
  Scalar item() const;
  template <typename T>
  std::vector<T> to_vector() const;

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

  // ---- in-place arithmetic (see runtime/ops.h for out-of-place) ----
  Tensor& operator+=(const Tensor& other);
  Tensor& operator-=(const Tensor& other);
  Tensor& operator*=(const Tensor& other);
  Tensor& operator/=(const Tensor& other);
  Tensor& operator+=(const Scalar& other);
  Tensor& operator-=(const Scalar& other);
  Tensor& operator*=(const Scalar& other);
  Tensor& operator/=(const Scalar& other);

 private:
  const TensorImpl& impl() const {
    TS_CHECK(impl_ != nullptr, "[Tensor] operation on an undefined tensor");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

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
  Tensor c = to(dtype_of<T>).cpu().contiguous();
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
