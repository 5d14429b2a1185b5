#pragma once
// Element types, their sizes and names, and PyTorch's type promotion.

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string_view>

#include "tessera/runtime/half.h"

namespace tessera {

// X-macro of every dtype: (enumerator, C++ type, name). Order is the promotion lattice order.
#define TS_FOR_EACH_DTYPE(X)         \
  X(kBool, bool, "bool")             \
  X(kUInt8, uint8_t, "uint8")        \
  X(kInt32, int32_t, "int32")        \
  X(kInt64, int64_t, "int64")        \
  X(kFloat16, Half, "float16")       \
  X(kBFloat16, BFloat16, "bfloat16") \
  X(kFloat32, float, "float32")      \
  X(kFloat64, double, "float64")

enum class DType : uint8_t {
#define TS_DTYPE_ENUM(e, T, name) e,
  TS_FOR_EACH_DTYPE(TS_DTYPE_ENUM)
#undef TS_DTYPE_ENUM
};

inline constexpr DType kBool = DType::kBool;
inline constexpr DType kUInt8 = DType::kUInt8;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kFloat16 = DType::kFloat16;
inline constexpr DType kBFloat16 = DType::kBFloat16;
inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr int kNumDTypes = 8;

size_t element_size(DType t);
std::string_view dtype_name(DType t);
inline bool is_floating_point(DType t) { return t >= kFloat16; }
inline bool is_integral(DType t, bool include_bool = false) {
  return t == kBool ? include_bool : t < kFloat16;
}
inline bool is_reduced_float(DType t) { return t == kFloat16 || t == kBFloat16; }

// torch.promote_types: the smallest type both can be converted to without losing category.
DType promote_types(DType a, DType b);

// Default floating dtype, used by factories and by int/float promotion with Python-like scalars.
inline DType default_float_dtype() { return kFloat32; }

std::ostream& operator<<(std::ostream& os, DType t);

template <typename T>
struct CppTypeToDType;
#define TS_DTYPE_TRAIT(e, T, name)           \
  template <>                                \
  struct CppTypeToDType<T> {                 \
    static constexpr DType value = DType::e; \
  };
TS_FOR_EACH_DTYPE(TS_DTYPE_TRAIT)
#undef TS_DTYPE_TRAIT

template <typename T>
inline constexpr DType dtype_of = CppTypeToDType<T>::value;

}  // namespace tessera

template <>
struct fmt::formatter<tessera::DType> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(tessera::DType t, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tessera::dtype_name(t), ctx);
  }
};
