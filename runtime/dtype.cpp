#include "tessera/runtime/dtype.h"

#include <array>

namespace tessera {

size_t element_size(DType t) {
  switch (t) {
#define TS_CASE(e, T, name) \
  case DType::e:            \
    return sizeof(T);
    TS_FOR_EACH_DTYPE(TS_CASE)
#undef TS_CASE
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
#define TS_CASE(e, T, name) \
  case DType::e:            \
    return name;
    TS_FOR_EACH_DTYPE(TS_CASE)
#undef TS_CASE
  }
  return "?";
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // Float16 with BFloat16 has no common 16-bit type: both go to float32, as in PyTorch.
  if (is_reduced_float(a) && is_reduced_float(b)) return kFloat32;
  // Otherwise the lattice is a total order: bool < uint8 < int32 < int64 < f16|bf16 < f32 < f64.
  return a > b ? a : b;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace tessera
