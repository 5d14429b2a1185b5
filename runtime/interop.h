#pragma once
// Tensors over memory Tessera does not own, without a copy: from_blob (libtorch's
// torch::from_blob) and the DLPack exchange with other frameworks (DLPack's legacy
// DLManagedTensor and the versioned DLManagedTensorVersioned of DLPack 1.x, runtime/dlpack.h).
//
// What crosses: any Tessera dtype (bool as kDLBool 8 bits, uint8 as kDLUInt 8, int32/int64 as
// kDLInt, float16/float32/float64 as kDLFloat, bfloat16 as kDLBfloat 16), one lane; CPU (kDLCPU)
// and CUDA (kDLCUDA with the device index) memory; any non-negative strides (in elements) and
// the storage offset (DLTensor.byte_offset from the data pointer). Neither side synchronizes
// CUDA streams: the caller orders the producer's work before the consumer's.
//
// Ownership: to_dlpack keeps the tensor's storage alive until the consumer calls the returned
// struct's deleter (once). from_dlpack takes ownership of the struct: its deleter runs once, when
// the last tensor viewing the memory dies. When from_dlpack or from_blob throws, nothing was
// taken: the caller still owns the struct (and calls its deleter) or the memory, as with a
// DLPack capsule that was not consumed.

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "tessera/runtime/dlpack.h"
#include "tessera/runtime/shape.h"
#include "tessera/runtime/tensor.h"
#include "tessera/runtime/tensor_options.h"

namespace tessera {

// The DLPack version Tessera's versioned exports carry and the major version its imports read.
inline constexpr DLPackVersion kDLPackVersion{1, 0};

// A tensor of `sizes` (and `strides` in elements; contiguous when absent) over memory at `data`
// on options' device, as torch::from_blob: no copy; views, in-place ops and autograd work as on
// any tensor (a leaf that requires grad when the options say so, of a floating dtype). When the
// last view dies, `deleter(data)` runs once; an empty deleter never frees the memory, which
// must then outlive every view. The memory must hold every element the strides reach.
// Errors: null data with elements; a negative size or stride; more bytes than int64 counts;
// a CUDA device this machine lacks (DeviceError); requires_grad with a non-floating dtype.
Tensor from_blob(void* data, Shape sizes, std::optional<Shape> strides,
                 std::function<void(void*)> deleter, TensorOptions options = {});

// The tensor as a legacy DLManagedTensor, sharing its memory: data is the storage's base pointer
// (null for an empty tensor) and byte_offset the storage offset in bytes. The consumer calls
// ->deleter(ptr) once when done; until then the memory lives, even when every Tensor is gone.
// Exports the data alone (as detach()): autograd does not follow it.
// Errors: an undefined tensor; a DTensor (export its local shard: to_local()); a read-only
// tensor (the legacy struct cannot say read-only: use to_dlpack_versioned).
DLManagedTensor* to_dlpack(const Tensor& t);
// The same as a DLManagedTensorVersioned (version kDLPackVersion). flags has
// DLPACK_FLAG_BITMASK_READ_ONLY when `read_only` is true or the tensor is read-only.
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, bool read_only = false);

// A tensor viewing a DLPack tensor's memory, taking ownership of `managed` (its deleter, when not
// null, runs once when the last view dies; the shape and strides are read now). Null strides
// mean contiguous. A tensor imported with DLPACK_FLAG_BITMASK_READ_ONLY refuses in-place writes
// (Error); DLPACK_FLAG_BITMASK_IS_COPIED needs nothing more.
// Errors (nothing is consumed): a null pointer; a versioned major version other than
// kDLPackVersion.major; ndim < 0; null shape (or data, with elements); a negative size or
// stride; lanes != 1 or a type Tessera lacks (DTypeError); a device other than CPU and CUDA, or
// a CUDA index this machine lacks (DeviceError).
Tensor from_dlpack(DLManagedTensor* managed);
Tensor from_dlpack(DLManagedTensorVersioned* managed);

}  // namespace tessera
