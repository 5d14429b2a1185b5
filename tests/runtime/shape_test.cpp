#include <catch2/catch.hpp>
#include <set>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

// Shape keeps kInlineDims entries in itself and moves to the heap beyond (Note [Inline shapes]);
// every operation is checked against std::vector doing the same, on both sides of that edge.
namespace {

std::vector<int64_t> iota_vector(size_t n, int64_t first) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<int64_t>(i);
  return v;
}

bool same(const Shape& s, const std::vector<int64_t>& v) {
  return s.size() == v.size() && std::equal(s.begin(), s.end(), v.begin());
}

}  // namespace

TEST_CASE("Shape behaves as std::vector inline and on the heap", "[runtime][shape]") {
  for (size_t n : {size_t{0}, size_t{1}, Shape::kInlineDims - 1, Shape::kInlineDims,
                   Shape::kInlineDims + 1, size_t{20}}) {
    INFO(n << " dims");
    const std::vector<int64_t> v = iota_vector(n, 3);
    Shape s(v.begin(), v.end());
    CHECK(same(s, v));
    CHECK(s.ndim() == static_cast<int64_t>(n));

    Shape pushed;
    for (int64_t x : v) pushed.push_back(x);
    CHECK(pushed == s);

    Shape copy = s;  // copy, then both change independently
    Shape moved = std::move(copy);
    CHECK(copy.empty());
    CHECK(same(moved, v));
    moved.push_back(99);
    CHECK(same(s, v));

    Shape assigned{1, 2};
    assigned = s;
    CHECK(assigned == s);
    assigned = std::move(moved);
    std::vector<int64_t> with_99 = v;
    with_99.push_back(99);
    CHECK(same(assigned, with_99));

    // insert and erase at the front, middle and end, one and several at a time
    for (size_t at : {size_t{0}, n / 2, n}) {
      std::vector<int64_t> want = v;
      Shape got = s;
      want.insert(want.begin() + static_cast<std::ptrdiff_t>(at), 7);
      got.insert(got.begin() + static_cast<std::ptrdiff_t>(at), 7);
      CHECK(same(got, want));
      want.insert(want.begin() + static_cast<std::ptrdiff_t>(at), {8, 9, 10});
      got.insert(got.begin() + static_cast<std::ptrdiff_t>(at), {8, 9, 10});
      CHECK(same(got, want));
      // a range from the Shape itself (it may move to the heap while inserting)
      want.insert(want.begin(), want.begin(), want.end());
      got.insert(got.begin(), got.begin(), got.end());
      CHECK(same(got, want));
      want.erase(want.begin() + static_cast<std::ptrdiff_t>(at));
      got.erase(got.begin() + static_cast<std::ptrdiff_t>(at));
      CHECK(same(got, want));
      want.erase(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(at));
      got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(at));
      CHECK(same(got, want));
    }

    Shape resized = s;
    resized.resize(n + 3, -1);
    std::vector<int64_t> want_resized = v;
    want_resized.resize(n + 3, -1);
    CHECK(same(resized, want_resized));
    resized.resize(n / 2);
    CHECK(same(resized,
               std::vector<int64_t>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2))));

    const std::vector<int64_t> back = s;  // implicit conversion, both ways
    CHECK(back == v);
    CHECK(s == v);
    CHECK(Shape(v) == s);
  }
}

TEST_CASE("Shape compares, orders, prints and counts like a list of sizes", "[runtime][shape]") {
  CHECK(Shape{2, 3} == Shape{2, 3});
  CHECK(Shape{2, 3} != Shape{2, 3, 1});
  CHECK(Shape{2, 3} < Shape{2, 4});
  CHECK(Shape{2} < Shape{2, 0});
  CHECK(Shape{} < Shape{0});
  const std::set<Shape> ordered{{3}, {1, 2}, {1}, {1, 2, 3, 4, 5, 6, 7}};
  CHECK(ordered.begin()->size() == 1);
  CHECK(fmt::format("{}", Shape{2, 3}) == "[2, 3]");
  CHECK(fmt::format("{}", Shape{}) == "[]");
  CHECK(Shape{2, 3, 4}.numel() == 24);
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape(3, 5) == Shape{5, 5, 5});
  CHECK(Shape(2) == Shape{0, 0});
  Shape s{1, 2};
  CHECK_THROWS_AS(s.at(2), std::out_of_range);
  CHECK(s.at(1) == 2);
  Shape a{1, 2, 3, 4, 5, 6, 7}, b{9};
  swap(a, b);
  CHECK(a == Shape{9});
  CHECK(b == Shape{1, 2, 3, 4, 5, 6, 7});
}
