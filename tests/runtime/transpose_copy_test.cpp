// Copies between operands contiguous along different axes (the tiled path of the CPU copy kernel,
// Note [Tiled transposed copies]) against a byte-by-byte reference walked by index arithmetic.

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kBFloat16, kFloat16,
                                       kInt64,   kInt32,   kUInt8,    kBool};

// A contiguous tensor of random bytes (bool: 0 or 1): neighbouring elements, and the bytes within
// one, differ, so a misplaced or partial element shows.
Tensor random_bytes(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = empty(shape, TensorOptions().dtype(dtype));
  std::mt19937 gen(seed);
  auto* p = static_cast<unsigned char*>(t.raw_data());
  const unsigned mask = dtype == kBool ? 1 : 0xff;
  const size_t n = t.nbytes();
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(gen() & mask);
  return t;
}

// "" when every element of dst has src's bytes at the same index, else the first that does not.
// Offsets come from each tensor's own strides, stepping a multi-index (no geometry shared with the
// kernel).
std::string mismatch(const Tensor& dst, const Tensor& src) {
  if (dst.sizes() != src.sizes()) return "shapes differ";
  const auto* d = static_cast<const unsigned char*>(dst.raw_data());
  const auto* s = static_cast<const unsigned char*>(src.raw_data());
  const auto size = static_cast<int64_t>(dst.element_size());
  const Shape& sizes = dst.sizes();
  const Shape &dst_strides = dst.strides(), &src_strides = src.strides();
  const int64_t n = dst.numel();
  std::vector<int64_t> idx(sizes.size(), 0);
  int64_t od = 0, os = 0;  // element offsets of idx
  for (int64_t flat = 0; flat < n; ++flat) {
    if (std::memcmp(d + od * size, s + os * size, static_cast<size_t>(size)) != 0) {
      return "element " + std::to_string(flat) + " of " + std::to_string(n);
    }
    for (size_t k = sizes.size(); k-- > 0;) {
      od += dst_strides[k];
      os += src_strides[k];
      if (++idx[k] < sizes[k]) break;
      od -= idx[k] * dst_strides[k];
      os -= idx[k] * src_strides[k];
      idx[k] = 0;
    }
  }
  return "";
}

// src copied by contiguous() and by copy_ into a contiguous tensor of other random bytes.
void check_copies(const Tensor& src, uint32_t seed) {
  CHECK(mismatch(src.contiguous(), src) == "");
  Tensor dst = random_bytes(src.sizes(), src.dtype(), seed);
  dst.copy_(src);
  CHECK(mismatch(dst, src) == "");
}

}  // namespace

TEST_CASE("t() copies match the reference at every dtype and edge", "[runtime][copy]") {
  const std::vector<Shape> shapes = {{1, 1},   {1, 7},     {7, 1},     {33, 65},
                                     {64, 64}, {257, 129}, {520, 1031}};
  for (int threads : {1, 2}) {
    const IntraOpThreadsGuard scope(threads);
    for (DType dtype : kAllDTypes) {
      for (const Shape& shape : shapes) {
        INFO(threads << " threads, " << dtype << ", t() of " << shape);
        const Tensor base = random_bytes(shape, dtype, 1);
        check_copies(base.t(), 2);
        // Into a transposed destination from a contiguous source.
        Tensor dst = random_bytes(shape, dtype, 3).t();
        const Tensor src = random_bytes(dst.sizes(), dtype, 4);
        dst.copy_(src);
        CHECK(mismatch(dst, src) == "");
      }
    }
  }
}

TEST_CASE("permuted copies match the reference", "[runtime][copy]") {
  struct Case {
    Shape shape;
    Shape dims;
  };
  // Shared inner runs of 9 and 16 elements make units of odd and of whole-line sizes; the last
  // case's run is longer than the tiled path takes.
  const std::vector<Case> cases = {
      {{3, 33, 65}, {0, 2, 1}},      {{5, 17, 40}, {2, 0, 1}},       {{4, 40, 9}, {1, 0, 2}},
      {{2, 33, 5, 7}, {0, 2, 1, 3}}, {{2, 9, 3, 16}, {0, 2, 1, 3}},  {{2, 3, 33, 65}, {0, 1, 3, 2}},
      {{6, 5, 4, 3}, {3, 1, 2, 0}},  {{8, 64, 4, 32}, {0, 2, 1, 3}}, {{3, 2, 300}, {1, 0, 2}}};
  for (int threads : {1, 2}) {
    const IntraOpThreadsGuard scope(threads);
    for (DType dtype : kAllDTypes) {
      for (const Case& c : cases) {
        INFO(threads << " threads, " << dtype << ", permute" << c.dims << " of " << c.shape);
        check_copies(random_bytes(c.shape, dtype, 5).permute(c.dims), 6);
      }
    }
  }
}

TEST_CASE("copies of strided, offset and broadcast transposed views", "[runtime][copy]") {
  for (int threads : {1, 2}) {
    const IntraOpThreadsGuard scope(threads);
    for (DType dtype : kAllDTypes) {
      INFO(threads << " threads, " << dtype);
      const Tensor base = random_bytes({40, 70}, dtype, 7);
      check_copies(base.t().slice(0, 3, 60), 8);
      check_copies(base.t().slice(1, 2, 39), 8);
      check_copies(base.t().slice(1, 0, 40, 3), 8);
      check_copies(base.t().slice(0, 0, 70, 2), 8);
      check_copies(base.slice(1, 5, 69).t(), 8);
      check_copies(
          random_bytes({5, 40, 70}, dtype, 9).permute({0, 2, 1}).narrow(1, 7, 50).select(0, 2), 10);
      check_copies(random_bytes({1, 70}, dtype, 11).expand({40, 70}).t(), 12);

      // Into a window of a larger transposed tensor: nothing outside the window changes.
      Tensor big = random_bytes({80, 50}, dtype, 13);
      const Tensor before = big.clone();
      Tensor window = big.t().slice(0, 5, 45).slice(1, 10, 50);  // big[10:50, 5:45] transposed
      const Tensor src = random_bytes({40, 40}, dtype, 14);
      window.copy_(src);
      CHECK(mismatch(window, src) == "");
      CHECK(mismatch(big.slice(0, 0, 10), before.slice(0, 0, 10)) == "");
      CHECK(mismatch(big.slice(0, 50, 80), before.slice(0, 50, 80)) == "");
      CHECK(mismatch(big.slice(1, 0, 5), before.slice(1, 0, 5)) == "");
      CHECK(mismatch(big.slice(1, 45, 50), before.slice(1, 45, 50)) == "");
    }
  }
}

TEST_CASE("transposed copies past the streaming-store threshold", "[runtime][copy]") {
  // 16 MiB and more of destination is written with streaming stores (Note [Streaming stores]).
  for (int threads : {1, 2}) {
    const IntraOpThreadsGuard scope(threads);
    for (DType dtype : {kFloat32, kBFloat16}) {
      const int64_t rows =
          (int64_t{16} << 20) / 2049 / static_cast<int64_t>(element_size(dtype)) + 3;
      INFO(threads << " threads, " << dtype << ", t() of [" << rows << ", 2049]");
      check_copies(random_bytes({rows, 2049}, dtype, 15).t(), 16);
    }
    INFO(threads << " threads, head split of [8, 512, 16, 64] float32");
    check_copies(random_bytes({8, 512, 16, 64}, kFloat32, 17).permute({0, 2, 1, 3}), 18);
  }
}

TEST_CASE("transposed copies of empty tensors", "[runtime][copy]") {
  for (const Shape& shape : std::vector<Shape>{{0, 5}, {5, 0}, {0, 0}, {2, 0, 3}}) {
    INFO("shape " << shape);
    const Tensor base = zeros(shape);
    const Tensor src = base.dim() == 2 ? base.t() : base.permute({2, 0, 1});
    const Tensor c = src.contiguous();
    CHECK(c.sizes() == src.sizes());
    CHECK(c.is_contiguous());
    Tensor dst = empty(src.sizes());
    dst.copy_(src);
    CHECK(dst.numel() == 0);
  }
}
