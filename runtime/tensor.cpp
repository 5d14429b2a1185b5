#include "tessera/runtime/tensor.h"

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops/view_grad.h"
#include "tessera/runtime/shared_pair_block.h"

namespace tessera {

void TensorImpl::refresh_contiguous() {
  int64_t expected = 1;
  contiguous = true;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (sizes[i] == 0) {
      contiguous = true;
      return;
    }
    if (strides[i] != expected) contiguous = false;
    expected *= sizes[i];
  }
}

namespace {

// Note [One allocation per new tensor]
// A new tensor is a TensorImpl (shared by copies of the Tensor) and a Storage (shared with its
// views), each with a std::shared_ptr control block: with std::make_shared that was two heap
// allocations, and two more for the sizes and strides vectors. The shapes now live inline (Note
// [Inline shapes] in runtime/shape.h) and both objects, with their control blocks, are placed in
// one heap block that is freed when both are gone (the impl usually dies first, the Storage with
// its last view). The data itself comes from the caching allocator (runtime/allocator.h), which
// reuses freed blocks. Views made from a tensor are one allocation each (std::make_shared of the
// TensorImpl). tests/runtime/tensor_allocations_test.cpp counts them.
// Room for both objects and their control blocks (a vtable pointer, two counts and the
// allocator beside each object); a piece that does not fit falls back to the heap.
constexpr size_t kTensorBlockBytes = sizeof(TensorImpl) + sizeof(Storage) + 2 * 48;
using TensorBlock = detail::SharedPairBlock<kTensorBlockBytes>;

// Releases the builder's reference on the block however make_empty leaves.
struct BuilderReference {
  TensorBlock* block;
  ~BuilderReference() { block->release_builder(); }
};

}  // namespace

Tensor Tensor::make_empty(const Shape& sizes, DType dtype, Device device, const char* op) {
  const int64_t numel = checked_numel(sizes, op);
  const auto element = static_cast<int64_t>(tessera::element_size(dtype));
  int64_t bytes = 0;
  TS_CHECK_SHAPE(!__builtin_mul_overflow(numel, element, &bytes), "[", op, "] shape ", sizes,
                 " of ", dtype, " needs more bytes than int64 can count (", numel, " elements of ",
                 element, " bytes)");
  const BuilderReference builder{TensorBlock::create()};
  auto impl = std::allocate_shared<TensorImpl>(
      detail::SharedPairAllocator<TensorImpl, kTensorBlockBytes>(builder.block));
  impl->storage =
      Storage::allocate(static_cast<size_t>(bytes), device,
                        detail::SharedPairAllocator<Storage, kTensorBlockBytes>(builder.block));
  impl->strides = contiguous_strides(sizes);
  impl->sizes = sizes;
  impl->dtype = dtype;
  impl->contiguous = true;
  return Tensor(std::move(impl));
}

Tensor Tensor::make_view(std::shared_ptr<Storage> storage, Shape sizes, Shape strides,
                         int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  impl->refresh_contiguous();
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const { return sizes().numel(); }

void* Tensor::raw_data() const {
  TS_CHECK(!is_distributed(), "[data_ptr] a DTensor (shape ", sizes(), ") has no single data ",
           "pointer; use to_local() for this rank's shard or full_tensor() for the whole tensor");
  TS_CHECK_T(DeviceError, device().is_cpu(), "[data_ptr] tensor is on ", device(),
             "; call .cpu() first");
  return static_cast<char*>(storage()->data()) +
         storage_offset() * static_cast<int64_t>(element_size());
}

Scalar Tensor::item() const {
  TS_CHECK(numel() == 1, "[item] a tensor with ", numel(), " elements (shape ", sizes(),
           ") cannot be converted to a scalar; item() needs exactly one element");
  Tensor c = full_tensor().cpu();
  return visit_dtype(dtype(), [&](auto tag) -> Scalar {
    using T = decltype(tag);
    return Scalar(*static_cast<const T*>(c.raw_data()));
  });
}

Tensor Tensor::full_tensor() const {
  return is_distributed() ? distributed_hooks().full_tensor(*this) : *this;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  if (any_distributed(*this)) {
    return distributed_op("to", {*this}, {.ints = {static_cast<int64_t>(dtype)}},
                          [dtype](const LocalCall& c) { return std::vector{c.in[0].to(dtype)}; });
  }
  if (any_requires_grad(*this)) return grad_hooks<ConvertGradHooks>().to_dtype(*this, dtype);
  Tensor out = make_empty(sizes(), dtype, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  if (any_distributed(*this)) {
    return distributed_op("to_device", {*this}, {},
                          [device](const LocalCall& c) { return std::vector{c.in[0].to(device)}; });
  }
  if (any_requires_grad(*this)) return grad_hooks<ConvertGradHooks>().to_device(*this, device);
  Tensor out = make_empty(sizes(), dtype(), device);
  out.copy_(*this);
  return out;
}

Tensor Tensor::clone() const {
  if (any_distributed(*this)) {
    return distributed_op("clone", {*this}, {},
                          [](const LocalCall& c) { return std::vector{c.in[0].clone()}; });
  }
  if (any_requires_grad(*this)) return grad_hooks<ConvertGradHooks>().clone(*this);
  Tensor out = make_empty(sizes(), dtype(), device());
  out.copy_(*this);
  return out;
}

namespace {

// Whether a and b, views of one storage, may reach a common byte: the spans from their lowest to
// their highest element intersect.
bool spans_intersect(const Tensor& a, const Tensor& b) {
  const auto span = [](const Tensor& t) {
    const auto item = static_cast<int64_t>(t.element_size());
    int64_t low = t.storage_offset() * item, high = low;
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t reach = (t.size(d) - 1) * t.stride(d) * item;
      (reach < 0 ? low : high) += reach;
    }
    return std::pair{low, high + item};
  };
  const auto [a_low, a_high] = span(a);
  const auto [b_low, b_high] = span(b);
  return a_low < b_high && b_low < a_high;
}

}  // namespace

// An in-place op writes every element: one memory location reached by two indices is refused.
void detail::check_writable(const Tensor& t, const char* op) {
  TS_CHECK(!t.storage()->read_only(), "[", op, "] writes a read-only tensor (imported from DLPack ",
           "with the read-only flag; shape ", t.sizes(), ", ", t.dtype(), " on ", t.device(),
           "); clone() it for a writable copy, or import it without the flag");
  TS_CHECK(!has_internal_overlap(t.sizes(), t.strides()), "[", op, "] more than one element of ",
           "the written-to tensor (shape ", t.sizes(), ", strides ", t.strides(),
           ") refers to a single memory location; clone() it first");
}

// A non-contiguous tensor that requires grad gets its history from clone.
Tensor Tensor::contiguous() const {
  if (any_distributed(*this)) {
    return distributed_op("contiguous", {*this}, {},
                          [](const LocalCall& c) { return std::vector{c.in[0].contiguous()}; });
  }
  return is_contiguous() ? *this : clone();
}

Tensor& Tensor::copy_(const Tensor& src) {
  TS_CHECK(src.defined(), "[copy_] source tensor is undefined");
  if (any_distributed(*this, src)) {
    distributed_op("copy_", {*this, src}, {}, [](const LocalCall& c) {
      Tensor self = c.in[0];
      self.copy_(c.in[1]);
      return std::vector{self};
    });
    return *this;
  }
  // Before the autograd hook, which records nothing for a refused write.
  detail::check_writable(*this, "copy_");
  if (any_requires_grad(*this, src)) return grad_hooks<ConvertGradHooks>().copy_(*this, src);
  Tensor s = src.sizes() == sizes() ? src : src.expand(sizes());
  // The kernels read and write in one pass: a source sharing memory with self in another layout
  // (a.copy_(a.t()), a[1:].copy_(a[:-1])) would be read after parts of it were overwritten, so it
  // is read into a temporary first, as the in-place binary ops do. The same elements in the same
  // order copy in place.
  if (numel() > 0 && s.is_alias_of(*this) && spans_intersect(*this, s) &&
      !(s.storage_offset() == storage_offset() && s.strides() == strides() &&
        s.dtype() == dtype())) {
    s = s.clone();
  }
  TS_CHECK_T(DeviceError, s.device() == device() || s.device().is_cpu() || device().is_cpu(),
             "[copy_] cannot copy from ", s.device(), " to ", device());
  const Device kernel_device = device().is_cpu() ? s.device() : device();
  kernels(kernel_device.type(), "copy_").copy(*this, s);
  storage()->bump_version();
  return *this;
}

Tensor& Tensor::fill_(const Scalar& value) {
  if (any_distributed(*this)) {
    distributed_op("fill_", {*this}, {.reals = {value.to_double()}}, [value](const LocalCall& c) {
      Tensor self = c.in[0];
      self.fill_(value);
      return std::vector{self};
    });
    return *this;
  }
  detail::check_writable(*this, "fill_");
  if (any_requires_grad(*this)) return grad_hooks<ConvertGradHooks>().fill_(*this, value);
  check_fits(value, dtype(), "fill_");
  kernels_for(*this, "fill_").fill(*this, value);
  storage()->bump_version();
  return *this;
}

}  // namespace tessera
