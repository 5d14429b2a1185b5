#pragma once
// Shape: a list of int64_t sizes (or strides), constructible from {2, 3}.

#include <fmt/format.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <ostream>
#include <vector>

namespace tessera {

// Note [Inline shapes]
// Every tensor carries two Shapes (sizes and strides), and a new tensor should cost one heap
// allocation (See Note [One allocation per new tensor] in runtime/tensor.cpp): a Shape keeps up
// to kInlineDims entries inside itself and goes to the heap only beyond that, as PyTorch's
// SizesAndStrides does with 5. The interface is std::vector's, as far as the code uses it, and a
// Shape converts to and from std::vector<int64_t> implicitly.
class Shape {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  static constexpr size_t kInlineDims = 6;

  Shape() noexcept : data_(inline_) {}
  Shape(std::initializer_list<int64_t> dims) : Shape() { append(dims.begin(), dims.size()); }
  explicit Shape(size_t n, int64_t value = 0) : Shape() { resize(n, value); }
  template <std::input_iterator It>
  Shape(It first, It last) : Shape() {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& v) : Shape() {
    append(v.data(), v.size());
  }  // NOLINT: implicit
  Shape(const Shape& other) : Shape() { append(other.data_, other.size_); }
  Shape(Shape&& other) noexcept : Shape() { steal(other); }
  Shape& operator=(const Shape& other);
  Shape& operator=(Shape&& other) noexcept;
  Shape& operator=(std::initializer_list<int64_t> dims);
  ~Shape() { free_heap(); }

  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit

  int64_t ndim() const { return static_cast<int64_t>(size_); }
  // Product of the sizes; 1 for a scalar (empty) shape.
  int64_t numel() const;

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  int64_t* data() noexcept { return data_; }
  const int64_t* data() const noexcept { return data_; }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  int64_t& operator[](size_t i) noexcept { return data_[i]; }
  const int64_t& operator[](size_t i) const noexcept { return data_[i]; }
  // Bounds-checked: std::out_of_range beyond size(), as std::vector::at.
  int64_t& at(size_t i);
  const int64_t& at(size_t i) const;
  int64_t& front() noexcept { return data_[0]; }
  const int64_t& front() const noexcept { return data_[0]; }
  int64_t& back() noexcept { return data_[size_ - 1]; }
  const int64_t& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_t n);
  void resize(size_t n, int64_t value = 0);
  void clear() noexcept { size_ = 0; }
  void push_back(int64_t v);
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() noexcept { --size_; }
  void assign(size_t n, int64_t value);
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  void assign(std::initializer_list<int64_t> dims);
  iterator insert(const_iterator pos, int64_t value);
  iterator insert(const_iterator pos, size_t count, int64_t value);
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    // Through a copy: the range may lie in this Shape.
    const Shape items(first, last);
    return insert_range(pos, items.data_, items.size_);
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> dims) {
    return insert(pos, dims.begin(), dims.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last);
  void swap(Shape& other) noexcept;

  friend bool operator==(const Shape& a, const Shape& b) noexcept;
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept;

 private:
  void append(const int64_t* values, size_t n);
  void grow_to(size_t n);
  void free_heap() noexcept;
  void steal(Shape& other) noexcept;
  iterator insert_range(const_iterator pos, const int64_t* values, size_t n);
  bool on_heap() const noexcept { return data_ != inline_; }

  int64_t* data_;
  uint32_t size_ = 0;
  uint32_t capacity_ = kInlineDims;
  int64_t inline_[kInlineDims];
};

inline void swap(Shape& a, Shape& b) noexcept { a.swap(b); }

// The number of elements of a tensor of `sizes`, checked once where a shape is made (a factory,
// an expand, a view's geometry): every size must be >= 0 and the product must fit in int64,
// otherwise ShapeError naming `op` and the shape. Shape::numel of a made tensor cannot overflow.
int64_t checked_numel(const Shape& sizes, const char* op);

// Whether two indices reach one element (a dim of size > 1 with stride 0, as expand makes):
// writing into such a tensor is ill-defined, so in-place ops, copy_ and fill_ refuse it.
bool has_internal_overlap(const Shape& sizes, const Shape& strides);

// Strides of a contiguous (row-major) tensor of this shape.
Shape contiguous_strides(const Shape& sizes);
// Strides for viewing (sizes, strides) as new_sizes without a copy; nullopt when some run of
// merged dims is not contiguous (torch's computeStride; view raises, reshape copies).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes);

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
