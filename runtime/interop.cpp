// from_blob and the DLPack exchange (runtime/interop.h): tensors over memory Tessera does not own,
// held by Storage::external, and exports that keep a Tensor's storage alive in manager_ctx.

#include "tessera/runtime/interop.h"

#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "tessera/runtime/storage.h"

namespace tessera {

namespace {

// ---- dtypes and devices ----

DLDataType dl_dtype(DType t) {
  uint8_t code = kDLFloat;
  switch (t) {
    case kBool:
      code = kDLBool;
      break;
    case kUInt8:
      code = kDLUInt;
      break;
    case kInt32:
    case kInt64:
      code = kDLInt;
      break;
    case kBFloat16:
      code = kDLBfloat;
      break;
    case kFloat16:
    case kFloat32:
    case kFloat64:
      code = kDLFloat;
      break;
  }
  return DLDataType{code, static_cast<uint8_t>(element_size(t) * 8), 1};
}

const char* dl_code_name(uint8_t code) {
  switch (code) {
    case kDLInt:
      return "kDLInt";
    case kDLUInt:
      return "kDLUInt";
    case kDLFloat:
      return "kDLFloat";
    case kDLOpaqueHandle:
      return "kDLOpaqueHandle";
    case kDLBfloat:
      return "kDLBfloat";
    case kDLComplex:
      return "kDLComplex";
    case kDLBool:
      return "kDLBool";
    default:
      return "unknown";
  }
}

// "bool (kDLBool 8), uint8 (kDLUInt 8), ...": what an import accepts, from dl_dtype itself.
std::string supported_dl_dtypes() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    const DLDataType d = dl_dtype(t);
    s += detail::concat_message(i == 0 ? "" : ", ", t, " (", dl_code_name(d.code), " ",
                                static_cast<int>(d.bits), ")");
  }
  return s;
}

DType dtype_from_dl(DLDataType d, const char* op) {
  TS_CHECK_DTYPE(d.lanes == 1, "[", op, "] DLPack dtype ", dl_code_name(d.code), " ",
                 static_cast<int>(d.bits), " bits has ", d.lanes,
                 " lanes; Tessera tensors have 1 lane (no vector types)");
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    const DLDataType mine = dl_dtype(t);
    if (mine.code == d.code && mine.bits == d.bits) return t;
  }
  throw DTypeError(
      detail::concat_message("[", op, "] DLPack dtype code ", static_cast<int>(d.code), " (",
                             dl_code_name(d.code), ") with ", static_cast<int>(d.bits),
                             " bits has no Tessera dtype; supported: ", supported_dl_dtypes()));
}

// CUDA memory on a device this machine lacks could not be read or freed by Tessera's kernels.
void check_cuda_index(int index, const char* op) {
  const int count = cuda_device_count();
  TS_CHECK_T(DeviceError, index >= 0 && index < count, "[", op, "] CUDA device index ", index,
             " is out of range: this machine has ", count, " CUDA devices",
             count == 0 ? " (or this build of Tessera has no CUDA support)" : "");
}

DLDevice dl_device(Device d) {
  DLDevice out{};
  out.device_type = d.is_cpu() ? kDLCPU : kDLCUDA;
  out.device_id = d.is_cpu() ? 0 : d.index();
  return out;
}

Device device_from_dl(DLDevice d, const char* op) {
  if (d.device_type == kDLCPU) return Device::cpu();
  TS_CHECK_T(DeviceError, d.device_type == kDLCUDA, "[", op, "] DLPack device type ",
             static_cast<int>(d.device_type),
             " is not supported; Tessera imports kDLCPU (1) and kDLCUDA (2) memory (pinned or "
             "managed memory, kDLCUDAHost or kDLCUDAManaged, is not recognized either)");
  check_cuda_index(d.device_id, op);
  return Device::cuda(d.device_id);
}

// ---- tensors over external memory ----

// A tensor of (sizes, strides) over `data` + byte_offset: Storage::external holds the memory
// from its first byte that the tensor can reach, so that Tensor::storage_offset() and data() keep
// what the producer said (byte_offset in whole elements; a remainder moves the base pointer).
Tensor external_tensor(const char* op, void* data, uint64_t byte_offset, const Shape& sizes,
                       const std::optional<Shape>& given_strides, DType dtype, Device device,
                       std::function<void(void*)> deleter, bool read_only) {
  const int64_t numel = checked_numel(sizes, op);
  const Shape strides = given_strides ? *given_strides : contiguous_strides(sizes);
  TS_CHECK_SHAPE(strides.size() == sizes.size(), "[", op, "] got strides ", strides, " for sizes ",
                 sizes, "; give one stride per dim");
  for (const int64_t s : strides) {
    TS_CHECK_SHAPE(s >= 0, "[", op, "] negative strides ", strides, " (sizes ", sizes,
                   ") are not supported: Tessera tensors have strides >= 0");
  }
  TS_CHECK(numel == 0 || data != nullptr, "[", op, "] null data pointer for a tensor of shape ",
           sizes, " (", numel, " elements)");
  const auto item = static_cast<int64_t>(element_size(dtype));
  TS_CHECK_SHAPE(byte_offset <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "[", op,
                 "] byte offset ", byte_offset, " is more than int64 counts");
  const int64_t offset = static_cast<int64_t>(byte_offset) / item;
  // The last element reached, counted in elements from the base.
  int64_t last = offset;
  bool overflow = false;
  for (size_t d = 0; d < sizes.size() && numel > 0; ++d) {
    int64_t reach = 0;
    overflow |= __builtin_mul_overflow(sizes[d] - 1, strides[d], &reach);
    overflow |= __builtin_add_overflow(last, reach, &last);
  }
  int64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel > 0 ? last + 1 : offset, item, &nbytes);
  TS_CHECK_SHAPE(!overflow, "[", op, "] sizes ", sizes, " with strides ", strides,
                 " and element offset ", offset, " of ", dtype,
                 " reach more bytes than int64 counts");
  // Kernels read elements in place through typed pointers: one off its alignment is undefined
  // behaviour on the CPU and a fault on the GPU.
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) + byte_offset;
  TS_CHECK(numel == 0 || first % static_cast<uintptr_t>(item) == 0, "[", op, "] the data (", data,
           " + byte offset ", byte_offset, ") is not aligned to its ", item, "-byte ", dtype,
           " elements; copy it into aligned memory first");
  if (device.is_cuda()) check_cuda_index(device.index(), op);
  // The view first: once the Storage exists it owns the memory, so nothing may throw after it.
  Tensor t = Tensor::make_view(nullptr, sizes, strides, offset, dtype);
  void* base = data == nullptr
                   ? nullptr
                   : static_cast<char*>(data) + static_cast<int64_t>(byte_offset) % item;
  t.unsafe_impl()->storage =
      Storage::external(base, static_cast<size_t>(nbytes), device, std::move(deleter), read_only);
  return t;
}

// ---- export ----

// One heap block per export: the struct handed out, the reference that keeps the memory alive,
// and the shape and strides arrays it points to; manager_ctx points to the block.
template <typename Managed>
struct Export {
  Managed managed{};
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;

  static void deleter(Managed* self) { delete static_cast<Export*>(self->manager_ctx); }
};

template <typename Managed>
std::unique_ptr<Export<Managed>> export_tensor(const Tensor& t, const char* op) {
  TS_CHECK(t.defined(), "[", op, "] undefined tensor argument");
  TS_CHECK(!t.is_distributed(), "[", op, "] a DTensor (global shape ", t.sizes(),
           ") has no single memory to describe: export this rank's shard explicitly, ", op,
           "(DTensor(t).to_local()), or the whole tensor with ", op, "(t.full_tensor())");
  TS_CHECK(t.storage()->holds_memory(), "[", op, "] the tensor's storage (shape ", t.sizes(),
           ") has released its memory (fully_shard between forward and backward)");
  auto e = std::make_unique<Export<Managed>>();
  e->storage = t.storage();
  e->shape = t.sizes();
  e->strides = t.strides();
  DLTensor& dl = e->managed.dl_tensor;
  // DLPack asks for a null pointer when there are no elements.
  const bool empty = t.numel() == 0;
  dl.data = empty ? nullptr : t.storage()->data();
  dl.byte_offset =
      empty ? 0
            : static_cast<uint64_t>(t.storage_offset()) * static_cast<uint64_t>(t.element_size());
  dl.device = dl_device(t.device());
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  e->managed.manager_ctx = e.get();
  e->managed.deleter = &Export<Managed>::deleter;
  return e;
}

// ---- import ----

template <typename Managed>
Tensor import_tensor(Managed* managed, bool read_only, const char* op) {
  const DLTensor& dl = managed->dl_tensor;
  TS_CHECK(dl.ndim >= 0, "[", op, "] DLTensor.ndim is ", dl.ndim, "; it must be >= 0");
  TS_CHECK(dl.ndim == 0 || dl.shape != nullptr, "[", op, "] DLTensor.shape is null for ", dl.ndim,
           " dims");
  const DType dtype = dtype_from_dl(dl.dtype, op);
  const Device device = device_from_dl(dl.device, op);
  const Shape sizes(dl.shape, dl.shape + dl.ndim);
  std::optional<Shape> strides;
  if (dl.strides != nullptr) strides = Shape(dl.strides, dl.strides + dl.ndim);
  std::function<void(void*)> deleter;
  if (managed->deleter != nullptr) deleter = [managed](void*) { managed->deleter(managed); };
  return external_tensor(op, dl.data, dl.byte_offset, sizes, strides, dtype, device,
                         std::move(deleter), read_only);
}

}  // namespace

Tensor from_blob(void* data, Shape sizes, std::optional<Shape> strides,
                 std::function<void(void*)> deleter, TensorOptions options) {
  // Checked before the memory is taken, so that a refusal leaves it with the caller.
  TS_CHECK_DTYPE(!options.requires_grad_ || is_floating_point(options.dtype_),
                 "[from_blob] only tensors of floating point dtype can require gradients, got ",
                 options.dtype_);
  Tensor t = external_tensor("from_blob", data, 0, sizes, strides, options.dtype_, options.device_,
                             std::move(deleter), false);
  if (options.requires_grad_) t.requires_grad_();
  return t;
}

DLManagedTensor* to_dlpack(const Tensor& t) {
  auto e = export_tensor<DLManagedTensor>(t, "to_dlpack");
  // As NumPy's __dlpack__ before DLPack 1.0: a consumer could not know it must not write.
  TS_CHECK(!t.storage()->read_only(), "[to_dlpack] the tensor (shape ", t.sizes(),
           ") is read-only and the legacy DLManagedTensor cannot say so; export it with ",
           "to_dlpack_versioned, which sets DLPACK_FLAG_BITMASK_READ_ONLY, or clone() it");
  return &e.release()->managed;
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, bool read_only) {
  auto e = export_tensor<DLManagedTensorVersioned>(t, "to_dlpack_versioned");
  e->managed.version = kDLPackVersion;
  e->managed.flags = read_only || t.storage()->read_only() ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return &e.release()->managed;
}

Tensor from_dlpack(DLManagedTensor* managed) {
  TS_CHECK(managed != nullptr, "[from_dlpack] null DLManagedTensor pointer");
  return import_tensor(managed, false, "from_dlpack");
}

Tensor from_dlpack(DLManagedTensorVersioned* managed) {
  TS_CHECK(managed != nullptr, "[from_dlpack] null DLManagedTensorVersioned pointer");
  // Another major version lays the struct out differently: nothing past the version is read.
  TS_CHECK(managed->version.major == kDLPackVersion.major, "[from_dlpack] DLPack version ",
           managed->version.major, ".", managed->version.minor, " is not supported: Tessera reads ",
           kDLPackVersion.major, ".x (the struct was not consumed; call its deleter)");
  return import_tensor(managed, (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0,
                       "from_dlpack");
}

}  // namespace tessera
