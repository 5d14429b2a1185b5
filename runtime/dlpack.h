#pragma once
// DLPack's C structs: <dlpack/dlpack.h> (Debian's libdlpack-dev, DLPack 0.6) and what DLPack 1.x
// added to it that Tessera exchanges: the versioned managed tensor, its flag bits and the bool
// type code. Used through runtime/interop.h (to_dlpack, from_dlpack).
//
// Note [DLPack 1.x declarations]
// DLPack 0.6 has only the legacy DLManagedTensor; 1.0 added DLManagedTensorVersioned (a version,
// flags such as read-only, then the same DLTensor) and 0.8 the type code kDLBool. They are
// declared here exactly as the DLPack 1.x header lays them out (same names, field order and
// values), so that a producer or consumer built against DLPack 1.x exchanges the same bytes. A
// newer dlpack.h that declares them itself wins: DLPACK_MAJOR_VERSION (first defined by 1.0)
// and DLPACK_VERSION >= 80 (0.8) tell. The DLPACK_FLAG_* macros keep the specification's names,
// outside Tessera's TS_ macro prefix, for the same reason.

#include <dlpack/dlpack.h>

#include <cstdint>

#if !defined(DLPACK_MAJOR_VERSION)
extern "C" {

// The DLPack ABI version a versioned managed tensor follows: a consumer reads only a major
// version it knows; a newer minor version only adds enumeration values.
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

// A managed DLTensor with a version and flags (DLPack 1.x). The consumer calls deleter(self)
// once when done; everything up to `flags` stays where it is in future ABI versions.
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"

// The tensor must not be written through.
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
// The producer made a copy for this exchange: the consumer owns it alone until the deleter runs.
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#endif

#if !defined(DLPACK_MAJOR_VERSION) && (!defined(DLPACK_VERSION) || DLPACK_VERSION < 80)
// DLDataType.code of a boolean, stored in 8 bits (DLDataTypeCode of DLPack 0.8 and later).
inline constexpr uint8_t kDLBool = 6;
#endif
