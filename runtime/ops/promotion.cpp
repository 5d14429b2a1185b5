// See Note [Result type] in runtime/ops/promotion.h.

#include "tessera/runtime/ops/promotion.h"

namespace tessera {

namespace {

void promote_into(std::optional<DType>& slot, DType t) {
  slot = slot ? promote_types(*slot, t) : t;
}

// Folds a lower-priority class into a higher one: it only counts when it raises the category.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating_point(*higher)) return higher;
  if (*higher == kBool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

void ResultTypeState::add_dtype(DType t, bool zero_dim) {
  promote_into(zero_dim ? zero_dim_ : dim_, t);
}

void ResultTypeState::add(const Tensor& t) { add_dtype(t.dtype(), t.dim() == 0); }

void ResultTypeState::add(const Scalar& s) { promote_into(scalar_, s.natural_dtype()); }

DType ResultTypeState::result() const {
  return combine_categories(dim_, combine_categories(zero_dim_, scalar_))
      .value_or(default_float_dtype());
}

DType result_type(const Tensor& a, const Tensor& b) {
  // Equal dtypes promote to themselves whatever their classes.
  if (a.dtype() == b.dtype()) return a.dtype();
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

DType result_type(const Tensor& a, const Scalar& b) {
  ResultTypeState s;
  s.add(a);
  s.add(b);
  return s.result();
}

DType result_type(const Scalar& a, const Tensor& b) { return result_type(b, a); }

bool can_cast(DType from, DType to) {
  if (is_floating_point(from) && !is_floating_point(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

}  // namespace tessera
