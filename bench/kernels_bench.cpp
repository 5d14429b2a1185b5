// CPU kernels benchmark: memcpy bandwidth of this machine, elementwise, reduction and transposed
// copy bandwidth against it, row kernels on transposed inputs, GELU forward and backward on the
// MLP's hidden layer, GEMM against oneDNN called directly, and eager overhead of a tiny op.
//
// Bandwidth counts the bytes each op must move (reads + writes): memcpy of N bytes moves 2N,
// c = a + b moves 3N, exp moves 2N, sum moves N. "fresh" runs `c = a + b` as users write it
// (a new output per call, served by the caching allocator); "prealloc" calls the kernel into an
// output allocated once.

#include <tessera/tessera.h>

#include <cstring>
#include <functional>
#include <vector>

#include "bench/bench_util.h"
#include "bench/gemm_section.h"
#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/ops/elementwise_grad.h"

namespace ts = tessera;
using ts::bench::time_median;

namespace {

constexpr int64_t kBytes = int64_t{64} << 20;
constexpr int64_t kElems = kBytes / 4;

double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

void print_row(const char* name, const char* mode, double bytes_moved, double s,
               double memcpy_gbps) {
  double g = gbps(bytes_moved, s);
  fmt::print("  {:<6} {:<9} {:>9.3f} ms {:>9.2f} GB/s {:>7.1f}% of memcpy\n", name, mode, s * 1e3,
             g, 100.0 * g / memcpy_gbps);
}

// Copies of transposed views into contiguous tensors (each moves 2N bytes, as memcpy): the 2-D
// transpose of a [4096, 4096] float32 matrix (64 MiB), and an attention head split, permute(0, 2,
// 1, 3) of [8, 512, 16, 64] float32 (16 MiB, runs of 64 contiguous elements). "prealloc" copies
// into a destination allocated once; "fresh" is `x.t().contiguous()` as users write it.
void transposed_copy_section(const ts::KernelTable& k, double memcpy_gbps) {
  fmt::print("\ncopies of transposed views into contiguous float32 tensors:\n");
  const ts::Tensor m = ts::rand({4096, 4096});
  const ts::Tensor m_out = ts::empty({4096, 4096});
  const double m_bytes = 2.0 * static_cast<double>(m.nbytes());
  print_row("t()", "prealloc", m_bytes, time_median([&] { k.copy(m_out, m.t()); }, 15),
            memcpy_gbps);
  print_row("t()", "fresh", m_bytes, time_median([&] { ts::Tensor r = m.t().contiguous(); }, 15),
            memcpy_gbps);
  const ts::Tensor h = ts::rand({8, 512, 16, 64});
  const ts::Tensor h_out = ts::empty({8, 16, 512, 64});
  const double h_bytes = 2.0 * static_cast<double>(h.nbytes());
  const auto split = [&] { return h.permute({0, 2, 1, 3}); };
  print_row("heads", "prealloc", h_bytes, time_median([&] { k.copy(h_out, split()); }, 31),
            memcpy_gbps);
  print_row("heads", "fresh", h_bytes,
            time_median([&] { ts::Tensor r = split().contiguous(); }, 31), memcpy_gbps);
}

// Row kernels (softmax, the norms) on row-major rows beside the same rows read across the grain
// (a transposed [1024, 1024] float32 input, or softmax along dim 0), which are made row-major by
// the tiled copy first (Note [Rows read across the grain] in kernels/cpu/nn_rows.h): the
// strided figure is bounded below by the row-major one plus one copy (printed last).
void rows_across_grain_section() {
  fmt::print("\nrow kernels on [1024, 1024] float32, row-major input vs transposed (ms):\n");
  const ts::Tensor a = ts::randn({1024, 1024});
  const ts::Tensor at = ts::randn({1024, 1024}).t();
  const ts::Tensor w = ts::randn({1024});
  const ts::Tensor g = ts::randn({1024, 1024});
  struct RowOp {
    const char* name;
    std::function<ts::Tensor(const ts::Tensor&)> fn;
  };
  const auto softmax_backward = [&](const ts::Tensor& x, int64_t dim) {
    ts::Tensor leaf = x.detach().requires_grad_();
    return ts::autograd::grad({ts::softmax(leaf, dim)}, {leaf}, {g})[0];
  };
  const std::vector<RowOp> ops = {
      {"softmax(x, 1)", [](const ts::Tensor& x) { return ts::softmax(x, 1); }},
      {"softmax(x, 0)", [](const ts::Tensor& x) { return ts::softmax(x, 0); }},
      {"log_softmax(x, 1)", [](const ts::Tensor& x) { return ts::log_softmax(x, 1); }},
      {"softmax(x, 1) f+b", [&](const ts::Tensor& x) { return softmax_backward(x, 1); }},
      {"layer_norm(x)", [&](const ts::Tensor& x) { return ts::layer_norm(x, {1024}, w); }},
      {"rms_norm(x)", [&](const ts::Tensor& x) { return ts::rms_norm(x, {1024}, w); }},
  };
  fmt::print("  {:<20} {:>10} {:>12} {:>7}\n", "op", "row-major", "transposed", "ratio");
  for (const RowOp& op : ops) {
    const double rows = time_median([&] { ts::Tensor r = op.fn(a); }, 15);
    const double strided = time_median([&] { ts::Tensor r = op.fn(at); }, 15);
    fmt::print("  {:<20} {:>10.3f} {:>12.3f} {:>7.2f}\n", op.name, rows * 1e3, strided * 1e3,
               strided / rows);
  }
  fmt::print("  {:<20} {:>10} {:>12.3f}\n", "x.contiguous()", "",
             1e3 * time_median([&] { ts::Tensor r = at.contiguous(); }, 15));
}

// GELU of issue 19's MLP step: hidden layer [256, 1024] float32 (1 MiB, cache-resident, so the
// figures can exceed memcpy's). The forward moves 2 MiB, one backward 3 MiB (grad and x in, the
// gradient out). "composite" is the backward written with runtime ops, which create_graph takes.
void gelu_section(double memcpy_gbps) {
  constexpr double kMiB = 1 << 20;
  fmt::print("\nGELU on [256, 1024] float32 (the MLP's hidden layer):\n");
  ts::Generator gen(1);
  const ts::Tensor x = ts::randn({256, 1024}, {}, &gen);
  const ts::Tensor g = ts::randn({256, 1024}, {}, &gen);
  for (const char* approximate : {"none", "tanh"}) {
    fmt::print(" approximate=\"{}\":\n", approximate);
    const ts::PointwiseGradOp op = std::string(approximate) == "none"
                                       ? ts::PointwiseGradOp::kGeluBackward
                                       : ts::PointwiseGradOp::kGeluTanhBackward;
    print_row("fwd", "fresh", 2 * kMiB,
              time_median([&] { ts::Tensor r = ts::gelu(x, approximate); }, 51), memcpy_gbps);
    print_row("bwd", "kernel", 3 * kMiB,
              time_median([&] { ts::Tensor r = ts::pointwise_backward(op, g, x); }, 51),
              memcpy_gbps);
    ts::Tensor leaf = x.clone();
    leaf.requires_grad_();
    const auto step = [&](bool create_graph) {
      return time_median(
          [&] {
            const ts::Tensor y = ts::gelu(leaf, approximate);
            ts::autograd::grad({y}, {leaf}, {g}, {.create_graph = create_graph});
          },
          51);
    };
    print_row("f+b", "autograd", 5 * kMiB, step(false), memcpy_gbps);
    print_row("f+b", "composite", 5 * kMiB, step(true), memcpy_gbps);
  }
}

}  // namespace

int main() {
  fmt::print("Tessera kernels benchmark ({} intra-op threads)\n\n", ts::get_num_threads());

  // memcpy: the machine's copy bandwidth on touched, reused 64 MiB buffers, split over the same
  // threads as the kernels use.
  ts::Tensor src = ts::ones({kElems});
  ts::Tensor dst = ts::zeros({kElems});
  char* d = static_cast<char*>(dst.raw_data());
  const char* s = static_cast<const char*>(src.raw_data());
  double t_memcpy = time_median(
      [&] {
        ts::parallel_for(0, kBytes, 1 << 20, [&](int64_t b, int64_t e) {
          std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
        });
      },
      15);
  double memcpy_gbps = gbps(2.0 * kBytes, t_memcpy);
  fmt::print("memcpy 64 MiB: {:.2f} ms, {:.2f} GB/s (read + write)\n\n", t_memcpy * 1e3,
             memcpy_gbps);

  fmt::print("elementwise and reductions on 64 MiB float32:\n");
  ts::Tensor a = ts::rand({kElems});
  ts::Tensor b = ts::rand({kElems});
  ts::Tensor c = ts::empty({kElems});
  const ts::KernelTable& k = ts::kernels(ts::DeviceType::CPU, "bench");
  struct Binary {
    const char* name;
    ts::BinaryOp op;
  };
  for (Binary op : {Binary{"add", ts::BinaryOp::kAdd}, Binary{"mul", ts::BinaryOp::kMul}}) {
    print_row(op.name, "prealloc", 3.0 * kBytes, time_median([&] { k.binary(op.op, c, a, b); }, 15),
              memcpy_gbps);
    print_row(op.name, "fresh", 3.0 * kBytes,
              time_median([&] { ts::Tensor r = ts::binary_op(op.op, a, b); }, 15), memcpy_gbps);
  }
  print_row("exp", "prealloc", 2.0 * kBytes,
            time_median([&] { k.unary(ts::UnaryOp::kExp, c, a); }, 15), memcpy_gbps);
  print_row("exp", "fresh", 2.0 * kBytes, time_median([&] { ts::Tensor r = ts::exp(a); }, 15),
            memcpy_gbps);
  print_row("sum", "fresh", 1.0 * kBytes, time_median([&] { ts::Tensor r = ts::sum(a); }, 15),
            memcpy_gbps);

  transposed_copy_section(k, memcpy_gbps);
  rows_across_grain_section();
  gelu_section(memcpy_gbps);

  fmt::print("\nGEMM (square, GFLOP/s; ratio to oneDNN's matmul primitive called directly):\n");
  ts::bench::run_gemm_section();

  ts::Tensor x = ts::ones({1});
  ts::Tensor y = ts::ones({1});
  double t_tiny = ts::bench::time_per_call([&] { ts::Tensor r = x + y; }, 200000);
  fmt::print("\neager overhead: 1-element add {:.0f} ns per call\n", t_tiny * 1e9);
  return 0;
}
