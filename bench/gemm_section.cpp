// GEMM throughput of tessera::matmul beside oneDNN's matmul primitive called directly (created
// once, executed in a loop) in the same run: float32 and bfloat16, square 1024 / 2048 / 4096,
// row-major operands. tessera/oneDNN (throughput ratio) shows the cost of Tessera's entry checks,
// output allocation (served by the caching allocator) and primitive-cache lookup; the goal at
// these sizes is ~1.0.

#include "bench/gemm_section.h"

#include <fmt/format.h>
#include <omp.h>
#include <tessera/tessera.h>

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "bench/bench_util.h"

namespace ts = tessera;

namespace {

// An n x n matrix of values in [-1, 1), in `dtype`.
ts::Tensor make_matrix(int64_t n, ts::DType dtype, uint64_t seed) {
  return ts::bench::uniform_matrix(n, n, seed).to(dtype);
}

// Median seconds per call of tessera::matmul (a new output per call, as users write it).
double time_tessera(const ts::Tensor& a, const ts::Tensor& b, int reps) {
  return ts::bench::time_median([&] { ts::Tensor c = ts::matmul(a, b); }, reps, 1);
}

struct DirectTiming {
  double seconds = 0;  // 0: not timed (no optimized oneDNN kernel for this dtype here)
  std::string impl;
};

// oneDNN's primitive on the same buffers, created once; its reference implementation (what
// oneDNN falls back to without a kernel for the dtype) is not timed: it would take minutes.
DirectTiming time_onednn(const ts::Tensor& a, const ts::Tensor& b, int reps) {
  using dnnl::memory;
  const int64_t n = a.size(0);
  const auto type = a.dtype() == ts::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc md({n, n}, type, memory::format_tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), engine, true);
  if (!pd) return {0, "none"};
  DirectTiming result{0, pd.impl_info_str()};
  if (result.impl.starts_with("ref")) return result;
  const dnnl::matmul prim(pd);
  const memory ma(md, engine, a.raw_data()), mb(md, engine, b.raw_data()), mc(md, engine);
  const std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  result.seconds = ts::bench::time_median(
      [&] {
        prim.execute(stream, args);
        stream.wait();
      },
      reps, 1);
  return result;
}

}  // namespace

void tessera::bench::run_gemm_section() {
  // Both sides run on the runtime's thread count (oneDNN's OpenMP build reads the ICV).
  omp_set_num_threads(ts::get_num_threads());
  fmt::print("GEMM C = A @ B, square, row-major; {} threads; median of timed calls\n",
             ts::get_num_threads());
  fmt::print("  {:>5}  {:<8}  {:>10}  {:>9}  {:>10}  {:>9}  {:>13}  {}\n", "n", "dtype",
             "tessera ms", "GFLOP/s", "oneDNN ms", "GFLOP/s", "tessera/oneDNN", "oneDNN impl");
  for (const int64_t n : {1024, 2048, 4096}) {
    // Fewer calls at larger sizes keep the whole run near a minute on two cores.
    const int reps = n == 1024 ? 10 : n == 2048 ? 4 : 2;
    for (const ts::DType dtype : {ts::kFloat32, ts::kBFloat16}) {
      const ts::Tensor a = make_matrix(n, dtype, 1), b = make_matrix(n, dtype, 2);
      const double gflop =
          2e-9 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
      const double t = time_tessera(a, b, reps);
      const DirectTiming d = time_onednn(a, b, reps);
      if (d.seconds > 0) {
        fmt::print("  {:>5}  {:<8}  {:>10.2f}  {:>9.1f}  {:>10.2f}  {:>9.1f}  {:>13.3f}  {}\n", n,
                   ts::dtype_name(dtype), t * 1e3, gflop / t, d.seconds * 1e3, gflop / d.seconds,
                   d.seconds / t, d.impl);
      } else {
        fmt::print("  {:>5}  {:<8}  {:>10.2f}  {:>9.1f}  {:>10}  {:>9}  {:>13}  {} (not timed)\n",
                   n, ts::dtype_name(dtype), t * 1e3, gflop / t, "-", "-", "-", d.impl);
      }
    }
  }
}
