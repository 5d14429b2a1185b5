#pragma once
// Shape: a list of int64_t sizes (or strides), constructible from {2, 3}.

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <vector>

namespace tessera {

class Shape : public std::vector<int64_t> {
 public:
  using std::vector<int64_t>::vector;
  Shape(std::vector<int64_t> v) : std::vector<int64_t>(std::move(v)) {}  // NOLINT: implicit

  int64_t ndim() const { return static_cast<int64_t>(size()); }
  // Product of the sizes; 1 for a scalar (empty) shape.
  int64_t numel() const;
};

// The number of elements of a tensor of `sizes`, checked once where a shape is made (a factory,
// an expand, a view's geometry): every size must be >= 0 and the product must fit in int64,
// otherwise ShapeError naming `op` and the shape. Shape::numel of a made tensor cannot overflow.
int64_t checked_numel(const Shape& sizes, const char* op);

// Whether two indices reach one element (a dim of size > 1 with stride 0, as expand makes):
// writing into such a tensor is ill-defined, so in-place ops, copy_ and fill_ refuse it.
bool has_internal_overlap(const Shape& sizes, const Shape& strides);

// Strides of a contiguous (row-major) tensor of this shape.
Shape contiguous_strides(const Shape& sizes);

// NumPy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Wraps a possibly negative dim into [0, ndim); throws IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace tessera

template <>
struct fmt::formatter<tessera::Shape> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tessera::Shape& s, Ctx& ctx) const {
    return fmt::format_to(ctx.out(), "[{}]", fmt::join(s, ", "));
  }
};
