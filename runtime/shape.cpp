#include "tessera/runtime/shape.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "tessera/runtime/error.h"

namespace tessera {

Shape& Shape::operator=(const Shape& other) {
  if (this != &other) {
    clear();
    append(other.data_, other.size_);
  }
  return *this;
}

Shape& Shape::operator=(Shape&& other) noexcept {
  if (this != &other) {
    free_heap();
    data_ = inline_;
    capacity_ = kInlineDims;
    size_ = 0;
    steal(other);
  }
  return *this;
}

Shape& Shape::operator=(std::initializer_list<int64_t> dims) {
  assign(dims);
  return *this;
}

int64_t& Shape::at(size_t i) {
  if (i >= size_) throw std::out_of_range(fmt::format("Shape::at({}) of {} dims", i, size_));
  return data_[i];
}

const int64_t& Shape::at(size_t i) const { return const_cast<Shape*>(this)->at(i); }

void Shape::reserve(size_t n) {
  if (n > capacity_) grow_to(n);
}

void Shape::resize(size_t n, int64_t value) {
  reserve(n);
  for (size_t i = size_; i < n; ++i) data_[i] = value;
  size_ = static_cast<uint32_t>(n);
}

void Shape::push_back(int64_t v) {
  if (size_ == capacity_) grow_to(2 * static_cast<size_t>(capacity_));
  data_[size_++] = v;
}

void Shape::assign(size_t n, int64_t value) {
  clear();
  resize(n, value);
}

void Shape::assign(std::initializer_list<int64_t> dims) {
  clear();
  append(dims.begin(), dims.size());
}

Shape::iterator Shape::insert(const_iterator pos, int64_t value) {
  return insert_range(pos, &value, 1);  // value is a copy: safe if it came from this Shape
}

Shape::iterator Shape::insert(const_iterator pos, size_t count, int64_t value) {
  const Shape items(count, value);
  return insert_range(pos, items.data_, items.size_);
}

Shape::iterator Shape::erase(const_iterator first, const_iterator last) {
  const auto at = static_cast<size_t>(first - data_);
  const auto n = static_cast<size_t>(last - first);
  std::memmove(data_ + at, data_ + at + n, (size_ - at - n) * sizeof(int64_t));
  size_ -= static_cast<uint32_t>(n);
  return data_ + at;
}

void Shape::swap(Shape& other) noexcept {
  Shape tmp(std::move(other));
  other = std::move(*this);
  *this = std::move(tmp);
}

bool operator==(const Shape& a, const Shape& b) noexcept {
  return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
}

std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept {
  return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
}

void Shape::append(const int64_t* values, size_t n) {
  if (n == 0) return;  // values may be null (an empty vector's data())
  reserve(size_ + n);
  std::memcpy(data_ + size_, values, n * sizeof(int64_t));
  size_ += static_cast<uint32_t>(n);
}

void Shape::grow_to(size_t n) {
  auto* heap = new int64_t[n];
  std::memcpy(heap, data_, size_ * sizeof(int64_t));
  free_heap();
  data_ = heap;
  capacity_ = static_cast<uint32_t>(n);
}

void Shape::free_heap() noexcept {
  if (on_heap()) delete[] data_;
}

// Takes other's entries (its heap array when it has one) and leaves it empty and inline.
void Shape::steal(Shape& other) noexcept {
  if (other.on_heap()) {
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.data_ = other.inline_;
    other.capacity_ = kInlineDims;
  } else {
    std::memcpy(inline_, other.inline_, other.size_ * sizeof(int64_t));
  }
  size_ = other.size_;
  other.size_ = 0;
}

Shape::iterator Shape::insert_range(const_iterator pos, const int64_t* values, size_t n) {
  const auto at = static_cast<size_t>(pos - data_);
  if (n == 0) return data_ + at;
  reserve(size_ + n);
  std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(int64_t));
  std::memcpy(data_ + at, values, n * sizeof(int64_t));
  size_ += static_cast<uint32_t>(n);
  return data_ + at;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t s : *this) n *= s;
  return n;
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) {
    TS_CHECK_SHAPE(s >= 0, "[", op, "] negative dimension ", s, " in shape ", sizes,
                   "; sizes must be >= 0");
    overflow = overflow || __builtin_mul_overflow(n, s, &n);
  }
  // A zero anywhere makes the tensor empty, however large the other sizes.
  const bool empty = std::find(sizes.begin(), sizes.end(), 0) != sizes.end();
  TS_CHECK_SHAPE(empty || !overflow, "[", op, "] shape ", sizes,
                 " has more elements than int64 can count (at most ",
                 std::numeric_limits<int64_t>::max(), ")");
  return empty ? 0 : n;
}

bool has_internal_overlap(const Shape& sizes, const Shape& strides) {
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1 && strides[d] == 0) return true;
  }
  return false;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TS_CHECK_SHAPE(sa == sb || sa == 1 || sb == 1, "[", op, "] shapes ", a, " and ", b,
                   " cannot be broadcast: size ", sa, " vs ", sb, " at dim ", i,
                   " (sizes must match or one of them must be 1)");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim;
  int64_t hi = ndim == 0 ? 0 : ndim - 1;
  TS_CHECK_INDEX(dim >= lo && dim <= hi, "[", op, "] dimension ", dim,
                 " out of range: expected a dim in [", lo, ", ", hi, "] for a tensor of ", ndim,
                 " dims");
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << fmt::format("{}", s); }

}  // namespace tessera
