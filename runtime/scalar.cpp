#include "tessera/runtime/scalar.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "tessera/runtime/error.h"

namespace tessera {

namespace {

// The largest finite value of a floating type.
template <typename T>
double largest_finite() {
  if constexpr (std::is_same_v<T, Half>) {
    return 65504.0;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return 3.38953138925153547590470800371487866880e38;  // (2 - 2^-7) * 2^127
  } else {
    return static_cast<double>(std::numeric_limits<T>::max());
  }
}

// Whether `value` can be stored in T without overflow.
template <typename T>
bool fits(const Scalar& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_floating_point()) {
      const double v = value.to_double();
      // Doubles beyond 2^63 cannot name an int64; compare in double against the exact bounds.
      return std::isfinite(v) && v >= static_cast<double>(std::numeric_limits<T>::min()) &&
             v < -2.0 * static_cast<double>(std::numeric_limits<int64_t>::min()) &&
             v <= static_cast<double>(std::numeric_limits<T>::max());
    }
    const int64_t v = value.to_int64();
    if constexpr (std::is_same_v<T, int64_t>) {
      return true;
    } else {
      return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             v <= static_cast<int64_t>(std::numeric_limits<T>::max());
    }
  } else {
    const double v = value.to_double();
    return !std::isfinite(v) || std::abs(v) <= largest_finite<T>();
  }
}

}  // namespace

void check_fits(const Scalar& value, DType dtype, const char* op) {
  bool ok = true;
  switch (dtype) {
#define TS_FITS_CASE(e, T, name) \
  case DType::e:                 \
    ok = fits<T>(value);         \
    break;
    TS_FOR_EACH_DTYPE(TS_FITS_CASE)
#undef TS_FITS_CASE
  }
  TS_CHECK(ok, "[", op, "] value ", value, " cannot be converted to ", dtype, " without overflow");
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return os << (s.to_bool() ? "True" : "False");
    case Scalar::Kind::Int:
      return os << s.to_int64();
    case Scalar::Kind::Float:
      return os << s.to_double();
  }
  return os;
}

}  // namespace tessera
