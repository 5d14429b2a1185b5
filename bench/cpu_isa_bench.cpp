// CPU ISA variants (Note [CPU ISA variants] in kernels/cpu_isa.cpp): the vectorized kernels on
// 1M float32 elements (4 MiB, below the streaming-store threshold) under every variant this build
// and CPU can run, in one process, with the speedup over the first column (the baseline variant
// unless arguments, variant names, choose others). Kernels are called
// through the kernel table into outputs allocated once, so the figures are the kernels' own.

#include <tessera/tessera.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "tessera/runtime/cpu_isa.h"
#include "tessera/runtime/dispatch.h"

namespace ts = tessera;

namespace {

constexpr int64_t kRows = 1024;
constexpr int64_t kCols = 1024;
constexpr int64_t kElems = kRows * kCols;

struct Row {
  const char* name;
  double bytes;  // moved per call (reads + writes)
  std::function<void(const ts::KernelTable&)> run;
};

}  // namespace

int main(int argc, char** argv) {
  fmt::print("CPU ISA variants: vectorized kernels on {} float32 elements ({} intra-op threads)\n",
             kElems, ts::get_num_threads());
  ts::Generator gen(1);
  const ts::Tensor x = ts::randn({kRows, kCols}, {}, &gen);
  const ts::Tensor g = ts::randn({kRows, kCols}, {}, &gen);
  const ts::Tensor out = ts::empty({kRows, kCols});
  const ts::Tensor total = ts::empty({1, 1});
  constexpr double kN = 4.0 * kElems;  // bytes of one operand
  using K = const ts::KernelTable&;
  const auto unary = [&](ts::UnaryOp op) { return [&, op](K k) { k.unary(op, out, x); }; };
  const auto grad = [&](ts::PointwiseGradOp op) {
    return [&, op](K k) { k.pointwise_grad(op, out, g, x, ts::Tensor(), 0, 0); };
  };
  const std::vector<Row> rows = {
      {"exp", 2 * kN, unary(ts::UnaryOp::kExp)},
      {"tanh", 2 * kN, unary(ts::UnaryOp::kTanh)},
      {"sigmoid", 2 * kN, unary(ts::UnaryOp::kSigmoid)},
      {"gelu", 2 * kN, unary(ts::UnaryOp::kGelu)},
      {"gelu bwd", 3 * kN, grad(ts::PointwiseGradOp::kGeluBackward)},
      {"gelu_tanh bwd", 3 * kN, grad(ts::PointwiseGradOp::kGeluTanhBackward)},
      {"silu bwd", 3 * kN, grad(ts::PointwiseGradOp::kSiluBackward)},
      {"sum", kN,
       [&](K k) {
         k.reduce(ts::ReductionOp::kSum, total, x, {0, 1}, 0);
       }},
      {"softmax", 2 * kN, [&](K k) { k.softmax(out, x, 1, false); }},
      {"layer_norm", 2 * kN,
       [&](K k) {
         static const ts::Tensor mean = ts::empty({kRows}), rstd = ts::empty({kRows});
         k.layer_norm(out, mean, rstd, x, ts::Tensor(), ts::Tensor(), 1, 1e-5);
       }},
  };

  // Arguments (variant names) restrict the run to those variants.
  std::vector<ts::CpuIsa> isas = ts::compiled_cpu_isas();
  if (argc > 1) {
    std::vector<ts::CpuIsa> chosen;
    for (int i = 1; i < argc; ++i) chosen.push_back(ts::parse_cpu_isa(argv[i], "argument"));
    std::erase_if(isas, [&](ts::CpuIsa isa) {
      return std::find(chosen.begin(), chosen.end(), isa) == chosen.end();
    });
  }
  for (ts::CpuIsa isa : {ts::CpuIsa::kBaseline, ts::CpuIsa::kAvx2, ts::CpuIsa::kAvx512}) {
    if (std::find(isas.begin(), isas.end(), isa) == isas.end()) {
      fmt::print("  variant {}: skipped (not available here, or not asked for)\n",
                 ts::to_string(isa));
    }
  }
  const ts::CpuIsa saved = ts::active_cpu_isa();
  fmt::print("\n  {:<14}", "op");
  for (ts::CpuIsa isa : isas) fmt::print(" {:>28}", ts::to_string(isa));
  fmt::print("\n");
  for (const Row& r : rows) {
    fmt::print("  {:<14}", r.name);
    double base = 0;
    for (ts::CpuIsa isa : isas) {
      ts::set_cpu_isa(isa);
      const ts::KernelTable& k = ts::kernels(ts::DeviceType::CPU, "bench");
      const double s = ts::bench::time_median([&] { r.run(k); }, 31, 5);
      if (base == 0) base = s;
      fmt::print(" {:>7.1f} us {:>6.1f} GB/s x{:<4.2f}", s * 1e6, r.bytes / s / 1e9, base / s);
    }
    fmt::print("\n");
  }
  ts::set_cpu_isa(saved);
  return 0;
}
