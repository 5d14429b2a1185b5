#include "tessera/runtime/ops/promotion.h"

#include <array>
#include <catch2/catch.hpp>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

constexpr std::array<DType, 8> kAll = {kBool,    kUInt8,    kInt32,   kInt64,
                                       kFloat16, kBFloat16, kFloat32, kFloat64};

// torch.promote_types over every pair, in kAll order (written out, not derived).
constexpr DType b = kBool, u8 = kUInt8, i32 = kInt32, i64 = kInt64, f16 = kFloat16, bf = kBFloat16,
                f32 = kFloat32, f64 = kFloat64;
constexpr DType kPromoted[8][8] = {
    /* bool */ {b, u8, i32, i64, f16, bf, f32, f64},
    /* u8   */ {u8, u8, i32, i64, f16, bf, f32, f64},
    /* i32  */ {i32, i32, i32, i64, f16, bf, f32, f64},
    /* i64  */ {i64, i64, i64, i64, f16, bf, f32, f64},
    /* f16  */ {f16, f16, f16, f16, f16, f32, f32, f64},
    /* bf16 */ {bf, bf, bf, bf, f32, bf, f32, f64},
    /* f32  */ {f32, f32, f32, f32, f32, f32, f32, f64},
    /* f64  */ {f64, f64, f64, f64, f64, f64, f64, f64},
};

// A tensor of shape (a 0-dim tensor when shape is empty) holding ones of dtype.
Tensor ones_of(DType dtype, const Shape& shape = {2}) {
  return from_vector(std::vector<double>(static_cast<size_t>(shape.numel()), 1.0), shape).to(dtype);
}

}  // namespace

TEST_CASE("promotion table over all dtype pairs", "[runtime][promotion]") {
  for (size_t i = 0; i < kAll.size(); ++i) {
    for (size_t j = 0; j < kAll.size(); ++j) {
      INFO(kAll[i] << " with " << kAll[j]);
      const DType want = kPromoted[i][j];
      CHECK(promote_types(kAll[i], kAll[j]) == want);
      const Tensor x = ones_of(kAll[i]), y = ones_of(kAll[j]);
      CHECK(result_type(x, y) == want);
      // Both operands 0-dim: same table.
      CHECK(result_type(ones_of(kAll[i], {}), ones_of(kAll[j], {})) == want);
      // The ops follow it: add and mul produce the promoted dtype, comparisons bool, div floats.
      const Tensor sum = x + y;
      CHECK(sum.dtype() == want);
      CHECK(sum.to_vector<double>() == std::vector<double>(2, want == kBool ? 1.0 : 2.0));
      CHECK((x * y).dtype() == want);
      CHECK((x == y).dtype() == kBool);
      CHECK((x == y).to_vector<bool>() == std::vector<bool>{true, true});
      CHECK((x / y).dtype() == (is_floating_point(want) ? want : kFloat32));
    }
  }
}

TEST_CASE("Python-like scalars do not promote within a category", "[runtime][promotion]") {
  // Expected result dtype for (tensor dtype, int scalar), (.., float scalar), (.., bool scalar).
  struct Row {
    DType tensor, with_int, with_float, with_bool;
  };
  const Row rows[] = {
      {kBool, kInt64, kFloat32, kBool},         {kUInt8, kUInt8, kFloat32, kUInt8},
      {kInt32, kInt32, kFloat32, kInt32},       {kInt64, kInt64, kFloat32, kInt64},
      {kFloat16, kFloat16, kFloat16, kFloat16}, {kBFloat16, kBFloat16, kBFloat16, kBFloat16},
      {kFloat32, kFloat32, kFloat32, kFloat32}, {kFloat64, kFloat64, kFloat64, kFloat64},
  };
  for (const Row& r : rows) {
    INFO(r.tensor);
    for (const Shape& shape : {Shape{2}, Shape{}}) {
      const Tensor t = ones_of(r.tensor, shape);
      CHECK(result_type(t, Scalar(1)) == r.with_int);
      CHECK(result_type(t, Scalar(1.5)) == r.with_float);
      CHECK(result_type(t, Scalar(true)) == r.with_bool);
      CHECK(result_type(Scalar(2), t) == r.with_int);
      CHECK((t * 2).dtype() == r.with_int);
      CHECK((t * 2.0).dtype() == r.with_float);
      CHECK((t * true).dtype() == r.with_bool);
      CHECK((2.0 * t).dtype() == r.with_float);
    }
  }
}

TEST_CASE("0-dim tensors rank between dimensioned tensors and scalars", "[runtime][promotion]") {
  struct Case {
    DType dim, zero_dim, want;
  };
  const Case cases[] = {
      {kInt32, kFloat64, kFloat64},    // higher category: the 0-dim tensor counts
      {kFloat32, kFloat64, kFloat32},  // same category: the dimensioned tensor wins
      {kInt64, kInt32, kInt64},       {kUInt8, kInt64, kUInt8},
      {kInt32, kInt64, kInt32},       {kBool, kInt32, kInt32},
      {kFloat16, kFloat32, kFloat16}, {kBFloat16, kFloat64, kBFloat16},
      {kInt64, kFloat16, kFloat16},   {kBool, kBool, kBool},
  };
  for (const Case& c : cases) {
    INFO(c.dim << " [2] with 0-dim " << c.zero_dim);
    const Tensor d = ones_of(c.dim), z = ones_of(c.zero_dim, {});
    CHECK(result_type(d, z) == c.want);
    CHECK(result_type(z, d) == c.want);
    CHECK((d + z).dtype() == c.want);
    CHECK((z * d).dtype() == c.want);
  }
  // 0-dim tensor with a scalar: the tensor is the higher class.
  CHECK(result_type(ones_of(kInt32, {}), Scalar(1)) == kInt32);
  CHECK(result_type(ones_of(kInt32, {}), Scalar(1.5)) == kFloat32);
  CHECK(result_type(ones_of(kFloat16, {}), Scalar(1.5)) == kFloat16);
  // Three classes at once.
  ResultTypeState s;
  s.add(ones_of(kUInt8));
  s.add(ones_of(kInt64, {}));
  s.add(Scalar(2.5));
  CHECK(s.result() == kFloat32);
  ResultTypeState f;
  f.add(ones_of(kInt32));
  f.add(ones_of(kFloat64, {}));
  f.add(Scalar(2.5));
  CHECK(f.result() == kFloat64);
}

TEST_CASE("can_cast follows torch.can_cast", "[runtime][promotion]") {
  for (DType from : kAll) {
    for (DType to : kAll) {
      INFO(from << " -> " << to);
      bool want = true;
      if (is_floating_point(from) && !is_floating_point(to)) want = false;
      if (from != kBool && to == kBool) want = false;
      CHECK(can_cast(from, to) == want);
    }
  }
}
