#pragma once
// Scalar: a number passed to ops (from double, int64_t or bool) that remembers its category,
// because PyTorch's promotion treats a Python int and a Python float differently.

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "tessera/runtime/dtype.h"

namespace tessera {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(double v) : kind_(Kind::Float), d_(v) {}      // NOLINT: implicit, as in PyTorch
  Scalar(float v) : Scalar(static_cast<double>(v)) {}  // NOLINT
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}         // NOLINT
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}              // NOLINT
  Scalar(Half v) : Scalar(static_cast<double>(static_cast<float>(v))) {}      // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<double>(static_cast<float>(v))) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int64() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return to_bool();
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int64());
    } else {
      return static_cast<T>(static_cast<float>(to_double()));
    }
  }

  // The dtype a tensor made from this scalar alone would get.
  DType natural_dtype() const {
    return kind_ == Kind::Float ? default_float_dtype() : kind_ == Kind::Int ? kInt64 : kBool;
  }

 private:
  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

template <>
inline double Scalar::to<double>() const {
  return to_double();
}

std::ostream& operator<<(std::ostream& os, const Scalar& s);

// Throws Error naming `op` when `value` cannot be stored in `dtype` without overflow, as PyTorch's
// fill_ / full do: an integral dtype takes finite values within its range; a floating dtype takes
// any value whose magnitude does not exceed its largest finite one (inf and nan pass through).
// Bool takes anything (nonzero is true).
void check_fits(const Scalar& value, DType dtype, const char* op);

}  // namespace tessera
