// Where a training step's time goes: issue 19's MLP step and transformer-block step
// (bench/training_steps.h), each run many times on 1 and 2 intra-op threads, with every float32
// product timed as it runs inside the step (kernels/cpu/gemm_choice.h, set_gemm_observer). Per
// product: calls per step, the backend the measured choice gave it, ms per step, GFLOP/s and the
// fraction of the threads' FMA peak (bench/fma_peak.h). Under each table: the step's time, the
// products' share, everything else (elementwise ops, norms, softmax, the autograd engine, the
// allocator), and the products' floor (their time at the peak). Operands inside a step come from
// the ops before them, often from beyond L2, which is why a product here can run below its rate
// in bench/gemm_backends_bench, where it repeats on the same operands.
//
//   build/dev/bench/step_products_bench [--steps N] [--threads 1,2]

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/fma_peak.h"
#include "bench/training_steps.h"
#include "tessera/kernels/cpu/gemm_choice.h"

namespace ts = tessera;
namespace steps = tessera::bench::steps;
using ts::cpu::GemmRecord;

namespace {

// Products grouped by what tells them apart in a step: dims, layouts, bias and backend.
using ProductKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool, int>;

struct ProductTotals {
  int64_t calls = 0;
  double seconds = 0.0;
};

class ProductLog {
 public:
  void add(const GemmRecord& r) {
    std::lock_guard<std::mutex> lock(mutex_);
    ProductTotals& t = totals_[ProductKey{r.batch, r.m, r.k, r.n, r.a_row_major, r.b_row_major,
                                          r.bias, static_cast<int>(r.backend)}];
    ++t.calls;
    t.seconds += r.seconds;
  }
  std::map<ProductKey, ProductTotals> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(totals_, {});
  }

 private:
  std::mutex mutex_;
  std::map<ProductKey, ProductTotals> totals_;
};

std::vector<ts::Tensor> make_leaves(const std::vector<steps::LeafSpec>& specs) {
  std::vector<ts::Tensor> leaves;
  for (const steps::LeafSpec& spec : specs) {
    leaves.push_back(
        (ts::randn(ts::Shape(spec.shape)) * spec.scale).requires_grad_(spec.requires_grad));
  }
  return leaves;
}

// The MLP step: forward and the gradients of W1 and W2.
std::function<void()> mlp_step() {
  const std::vector<ts::Tensor> leaves = make_leaves(steps::mlp_leaf_specs());
  const ts::Tensor labels = ts::randint(0, steps::kClasses, {steps::kRows});
  return [leaves, labels] {
    const ts::Tensor loss = steps::mlp_loss(leaves[0], leaves[1], leaves[2], labels);
    ts::autograd::grad({loss}, {leaves[1], leaves[2]});
  };
}

// The block step: forward and the gradients of every leaf.
std::function<void()> block_step() {
  const std::vector<ts::Tensor> leaves = make_leaves(steps::block_leaf_specs());
  const ts::Tensor mask = ts::from_vector(steps::causal_mask_values(), {steps::kSeq, steps::kSeq});
  return [leaves, mask] {
    ts::autograd::grad({steps::block_loss(leaves, mask, steps::TesseraOps{})}, leaves);
  };
}

std::string layout(bool row_major) { return row_major ? "row" : "col"; }

void report(const char* name, const std::function<void()>& step, double step_flops, int steps_run,
            int threads, double peak_gflops) {
  ts::set_num_threads(threads);
  for (int i = 0; i < 10; ++i) step();  // the GEMM choice is made and the allocator warm

  ProductLog log;
  ts::cpu::set_gemm_observer([&log](const GemmRecord& r) { log.add(r); });
  std::vector<double> step_seconds;
  for (int i = 0; i < steps_run; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    step_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  ts::cpu::set_gemm_observer(nullptr);
  const std::map<ProductKey, ProductTotals> totals = log.take();

  double mean_step = 0.0;
  for (double s : step_seconds) mean_step += s / steps_run;
  std::sort(step_seconds.begin(), step_seconds.end());
  const double median_step = step_seconds[step_seconds.size() / 2];

  fmt::print("\n{}, {} thread(s), {} steps (FMA peak {:.1f} GFLOP/s)\n", name, threads, steps_run,
             peak_gflops);
  fmt::print("| {:<34} | {:<9} | {:>9} | {:>9} | {:>8} | {:>7} |\n",
             "product (batch x M x K x N, a, b)", "backend", "per step", "ms/step", "GFLOP/s",
             "of peak");
  fmt::print("|{:-<36}|{:-<11}|{:-<11}|{:-<11}|{:-<10}|{:-<9}|\n", "", "", "", "", "", "");
  double product_seconds = 0.0, product_flops = 0.0;
  for (const auto& [key, t] : totals) {
    const auto [batch, m, k, n, a_row, b_row, bias, backend] = key;
    const double flops = steps::product_flops(m, k, n) * double(batch) * double(t.calls);
    const double gflops = flops / t.seconds / 1e9;
    product_seconds += t.seconds;
    product_flops += flops;
    const std::string what = fmt::format("{} x {}x{}x{}, {}, {}{}", batch, m, k, n, layout(a_row),
                                         layout(b_row), bias ? ", +bias" : "");
    fmt::print("| {:<34} | {:<9} | {:>9.2f} | {:>9.3f} | {:>8.1f} | {:>7.2f} |\n", what,
               ts::cpu::gemm_backend_name(static_cast<ts::cpu::GemmBackend>(backend)),
               double(t.calls) / steps_run, t.seconds / steps_run * 1e3, gflops,
               gflops / peak_gflops);
  }
  const double products_ms = product_seconds / steps_run * 1e3;
  const double step_ms = mean_step * 1e3;
  fmt::print(
      "step {:.3f} ms (mean; median {:.3f}): products {:.3f} ms ({:.0f}%, {:.1f} GFLOP/s, {:.2f} "
      "of peak), everything else {:.3f} ms\n",
      step_ms, median_step * 1e3, products_ms, 100.0 * products_ms / step_ms,
      product_flops / product_seconds / 1e9, product_flops / product_seconds / 1e9 / peak_gflops,
      step_ms - products_ms);
  fmt::print(
      "the products' floor: {:.4f} GFLOP per step ({:.4f} expected) take {:.3f} ms at the "
      "peak; the step is {:.2f}x that\n",
      product_flops / steps_run / 1e9, step_flops / 1e9,
      product_flops / steps_run / 1e9 / peak_gflops * 1e3,
      step_ms / (product_flops / steps_run / 1e9 / peak_gflops * 1e3));
}

std::vector<int> parse_threads(const char* list) {
  std::vector<int> out;
  for (const char* p = list; *p != '\0';) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 1) {
      fmt::print(stderr, "step_products_bench: --threads takes positive integers, e.g. 1,2\n");
      std::exit(2);
    }
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int steps_run = 60;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps_run = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = parse_threads(argv[++i]);
    } else {
      fmt::print(stderr, "usage: {} [--steps N] [--threads 1,2]\n", argv[0]);
      return 2;
    }
  }
  const auto mlp = mlp_step();
  const auto block = block_step();
  for (int t : threads) {
    const double peak = tessera::bench::fma_peak_gflops() * t;
    report("MLP step: cross_entropy(gelu(X W1) W2), 256x512x1024x10", mlp, steps::kMlpStepFlops,
           steps_run, t, peak);
    report("transformer block step (8x64 tokens, hidden 256, 8 heads, MLP 1024)", block,
           steps::kBlockStepFlops, steps_run, t, peak);
  }
  return 0;
}
