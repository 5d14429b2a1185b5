// Gradients of slices and selects added into the input's gradient buffer in place (Note
// [Gradients of slices added in place] in autograd/engine.cpp): the values against a float64
// reference built element by element, finite differences, second derivatives (which take the
// general path), hooks on the sliced tensor, and the memory the in-place form saves.

#include <catch2/catch.hpp>

#include "tessera/runtime/allocator.h"
#include "tests/autograd/op_inputs.h"

namespace tessera::autograd_test {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using In = std::vector<Tensor>;

constexpr int64_t kRows = 4, kCols = 12;

// The regions of a [kRows, kCols] tensor the loss below reads: three narrows that tile the
// columns (a fused qkv split), a strided slice overlapping two of them, and a row.
std::vector<Tensor> regions(const Tensor& y) {
  return {y.narrow(1, 0, 4), y.narrow(1, 4, 4), y.narrow(1, 8, 4), y.slice(1, 2, 11, 3),
          y.select(0, 2)};
}

// sum over regions r of (r * w_r).sum(), on y = x * 1.5 (a non-leaf: its gradient buffer is the
// engine's) and, where `whole`, plus y.sum() * 0.5: another path to y whose gradient arrives
// whole.
Tensor loss(const Tensor& x, const std::vector<Tensor>& weights, bool whole) {
  const Tensor y = x * 1.5;
  const std::vector<Tensor> parts = regions(y);
  Tensor total = whole ? y.sum() * 0.5 : zeros({}, x.options());
  for (size_t i = 0; i < parts.size(); ++i) total = total + (parts[i] * weights[i]).sum();
  return total;
}

std::vector<Tensor> region_weights(const Tensor& x, uint64_t seed) {
  std::vector<Tensor> w;
  for (const Tensor& r : regions(x.detach())) w.push_back(random_leaf(r.sizes(), seed++).detach());
  return w;
}

// d loss / d x, element by element in float64: each region's weight lands where it read y.
std::vector<double> reference_gradient(const std::vector<Tensor>& weights, bool whole) {
  std::vector<double> g(kRows * kCols, whole ? 0.5 : 0.0);
  const auto add = [&](int64_t r, int64_t c, const Tensor& w, int64_t wr, int64_t wc) {
    g[static_cast<size_t>(r * kCols + c)] +=
        w.to_vector<double>()[static_cast<size_t>(w.dim() == 1 ? wc : wr * w.size(1) + wc)];
  };
  for (int64_t part = 0; part < 3; ++part) {
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < 4; ++c) add(r, part * 4 + c, weights[part], r, c);
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < 3; ++j) add(r, 2 + 3 * j, weights[3], r, j);
  }
  for (int64_t c = 0; c < kCols; ++c) add(2, c, weights[4], 0, c);
  for (double& v : g) v *= 1.5;
  return g;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-12));
  }
}

TEST_CASE("gradients of slices and selects of one tensor sum to the float64 reference",
          "[slice_grad]") {
  for (const bool whole : {false, true}) {
    for (const bool transposed : {false, true}) {
      INFO((whole ? "with" : "without")
           << " a whole-tensor path, " << (transposed ? "transposed" : "contiguous") << " x");
      const Tensor x =
          transposed ? transposed_leaf({kRows, kCols}, 3) : random_leaf({kRows, kCols}, 3);
      const std::vector<Tensor> w = region_weights(x, 10);
      loss(x, w, whole).backward();
      check_close(x.grad().contiguous().to_vector<double>(), reference_gradient(w, whole));
    }
  }
}

TEST_CASE("slices added in place: gradcheck and gradgradcheck", "[slice_grad]") {
  const Tensor x = random_leaf({kRows, kCols}, 5);
  const std::vector<Tensor> w = region_weights(x, 20);
  // Squared, so that the second derivative is not zero.
  const auto fn = [&](const In& in) {
    const std::vector<Tensor> parts = regions(in[0]);
    Tensor total = zeros({}, in[0].options());
    for (size_t i = 0; i < parts.size(); ++i) total = total + (parts[i] * parts[i] * w[i]).sum();
    return total;
  };
  CHECK(gradcheck(fn, {x}));
  CHECK(gradgradcheck(fn, {x}));
}

TEST_CASE("a hook and retain_grad on the sliced tensor see the summed gradient", "[slice_grad]") {
  const Tensor x = random_leaf({kRows, kCols}, 7);
  const std::vector<Tensor> w = region_weights(x, 30);
  Tensor seen;
  const Tensor y = x * 1.5;
  y.register_hook([&](const Tensor& g) {
    seen = g.clone();
    return Tensor();
  });
  y.retain_grad();
  const std::vector<Tensor> parts = regions(y);
  Tensor total = zeros({}, x.options());
  for (size_t i = 0; i < parts.size(); ++i) total = total + (parts[i] * w[i]).sum();
  total.backward();
  std::vector<double> want = reference_gradient(w, false);
  for (double& v : want) v /= 1.5;
  check_close(seen.to_vector<double>(), want);
  check_close(y.grad().to_vector<double>(), want);
  check_close(x.grad().to_vector<double>(), reference_gradient(w, false));
}

TEST_CASE("the gradients of a tensor split in three take one buffer of its size, not two",
          "[slice_grad]") {
  // Each slice's gradient built whole and summed holds two buffers of x's size at once.
  const int64_t rows = 256, cols = 3 * 1024;
  const int64_t bytes = rows * cols * 4;
  Tensor x = rand({rows, cols});
  x.requires_grad_();
  Tensor total = zeros({});
  for (int64_t part = 0; part < 3; ++part) {
    total = total + (x.narrow(1, part * 1024, 1024) * 2.0).sum();
  }
  reset_peak_cpu_memory_stats();
  const int64_t before = cpu_allocator_stats().current_bytes;
  total.backward();
  const int64_t grown = cpu_allocator_stats().peak_bytes - before;
  INFO("peak growth " << grown << " bytes, x " << bytes << " bytes");
  CHECK(grown < bytes * 3 / 2);
  CHECK(x.grad().to_vector<float>() == std::vector<float>(static_cast<size_t>(rows * cols), 2.0f));
}

}  // namespace
}  // namespace tessera::autograd_test
