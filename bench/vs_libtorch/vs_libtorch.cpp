// vs_libtorch: Tessera beside libtorch (Debian's libtorch-dev 1.13, OpenBLAS) in one process,
// case by case, alternating A B A B, at 1 and 2 intra-op threads; ratio = Tessera / libtorch
// (below 1: Tessera is faster). The targets are issue 19's. Every case also compares the two
// results, so a fast wrong answer shows.
//
//   build/release/bench/vs_libtorch/vs_libtorch [--threads 1,2] [--rounds 25] [--filter TEXT]
//
// For libtorch's best figures run with ATEN_CPU_CAPABILITY=avx512 (where the CPU has it) and
// OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset; the header prints what was in effect.
//
// Under each table, the cases made of float32 products (the GEMMs, the training steps) against
// the physical limit: their products' FLOPs at the FMA peak of the threads, measured at the start
// (bench/fma_peak.h). A step cannot run faster than that floor; a target below what the floor
// allows says so. A single product's line names the backend Tessera's measured GEMM choice ran
// it on: a row over target on another backend than the one gemm_backends_bench finds fastest is
// the choice's miss, not the kernel's speed. The memory-bound cases (sum, in-place add) against a
// plain loop moving the same bytes at these threads (bench/memory_rate.h), timed in the same
// rounds: where both sides run at that loop's rate, the ratio is a tie at what the memory gives,
// decided by noise.
//
// Note [Rounds within target]
// A round times the two sides back to back, so its ratio is one paired comparison; the column
// "rounds" counts those that met the target. A row's median can land on either side of its
// target from run to run when the two sides are equally fast (the memory-bound rows, where both
// run at the plain loop's rate): each round is then a coin toss, and the count says so where one
// median cannot. Under each table every row over its target gets a sign test: the chance that
// as few of its rounds would meet the target if each round were a fair coin. A small chance
// (0.008 for none of 7 rounds) says the row is slower than its target; one near 0.5 says the
// run could not tell the two apart.

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/fma_peak.h"
#include "bench/vs_libtorch/cases.h"

namespace vs = tessera::bench::vs_libtorch;

namespace {

struct Options {
  std::vector<int> threads{1, 2};
  // 25 rounds (5.5 minutes for the table at 1 and 2 threads on a 2-core Xeon): with 9, the rows
  // near their target changed side between runs of the same build more often
  // (bench/history/2026-12.md, 2026-12-05, sixth session).
  int rounds = 25;
  std::string filter;
};

std::vector<int> parse_thread_list(const std::string& text) {
  std::vector<int> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const int n = std::atoi(text.substr(begin, end - begin).c_str());
    if (n < 1) throw std::invalid_argument("--threads takes a list of positive counts, e.g. 1,2");
    out.push_back(n);
    begin = end + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--threads" && has_value) {
      o.threads = parse_thread_list(argv[++i]);
    } else if (flag == "--rounds" && has_value) {
      o.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (flag == "--filter" && has_value) {
      o.filter = argv[++i];
    } else {
      std::cout << "usage: vs_libtorch [--threads 1,2] [--rounds N] [--filter TEXT]\n";
      std::exit(flag == "--help" ? 0 : 2);
    }
  }
  return o;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// libtorch 1.13's set_num_threads does not reach OpenBLAS's pthread pool, which starts with
// every core: without this its matmul would use 2 threads in the 1-thread rows.
bool set_openblas_threads(int n) {
  using SetThreads = void (*)(int);
  auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (fn == nullptr) return false;
  fn(n);
  return true;
}

std::string seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  return fmt::format("{:.3f} ms", s * 1e3);
}

// P(X <= k) for X ~ Binomial(n, 1/2): the chance that a fair coin per round puts at most k of n
// rounds within the target.
double sign_test(int k, int n) {
  double term = std::ldexp(1.0, -n);  // P(X = 0)
  double tail = 0;
  for (int i = 0; i <= k; ++i) {
    tail += term;
    term *= static_cast<double>(n - i) / (i + 1);  // P(X = i + 1) from P(X = i)
  }
  return tail;
}

// The rows over their target, each with its rounds' sign test (Note [Rounds within target]).
void print_sign_tests(const std::vector<std::pair<const vs::Case*, vs::CaseTiming>>& rows) {
  for (const auto& [c, t] : rows) {
    std::cout << fmt::format(
        "* {}: {:.2f} against {:.2f}; {} of {} rounds within target (a coin per round puts as "
        "few or fewer there with chance {:.3f})\n",
        c->name, t.ratio, c->target, t.rounds_within_target, t.rounds,
        sign_test(t.rounds_within_target, t.rounds));
  }
}

// Each case's products at `gflops` (the threads' FMA peak): the floor, both sides as multiples
// of it, and the fraction of the peak the target demands of the products alone.
void print_floors(const std::vector<std::pair<const vs::Case*, vs::CaseTiming>>& rows,
                  double gflops) {
  if (rows.empty() || gflops <= 0) return;
  std::cout << fmt::format("\nagainst the FMA peak ({:.1f} GFLOP/s at these threads):\n", gflops);
  for (const auto& [c, t] : rows) {
    const double floor_s = c->product_flops / (gflops * 1e9);
    std::cout << fmt::format(
        "  {}: {:.3f} GFLOP of products, {} at the peak; Tessera {:.2f}x that floor{}, libtorch "
        "{:.2f}x; the {:.2f} target leaves {:.2f}x (products at >= {:.0f}% of the peak with "
        "nothing else)\n",
        c->name, c->product_flops * 1e-9, seconds(floor_s), t.tessera_s / floor_s,
        c->tessera_gemm ? fmt::format(" (on {})", c->tessera_gemm()) : std::string(),
        t.libtorch_s / floor_s, c->target, c->target * t.libtorch_s / floor_s,
        100.0 * floor_s / (c->target * t.libtorch_s));
  }
}

// Each memory-bound case against its plain loop: the bytes moved, the loop's time and rate, both
// sides as multiples of the loop's time.
void print_memory_rates(const std::vector<std::pair<const vs::Case*, vs::CaseTiming>>& rows) {
  if (rows.empty()) return;
  std::cout
      << "\nagainst a plain loop moving the same bytes (on Tessera's buffers, these threads):\n";
  for (const auto& [c, t] : rows) {
    std::cout << fmt::format(
        "  {}: {:.1f} MB moved; the loop {} ({:.1f} GB/s); Tessera {:.2f}x the loop's time, "
        "libtorch {:.2f}x\n",
        c->name, c->memory_bytes * 1e-6, seconds(t.plain_s), c->memory_bytes / t.plain_s * 1e-9,
        t.tessera_s / t.plain_s, t.libtorch_s / t.plain_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  tessera::manual_seed(0);
  std::vector<vs::Case> cases = vs::op_cases();
  for (auto& c : vs::step_cases()) cases.push_back(std::move(c));

  std::cout << fmt::format(
      "vs_libtorch: Tessera vs libtorch {} in one process; {}; {} rounds per case, alternating\n"
      "ATEN_CPU_CAPABILITY={} OPENBLAS_CORETYPE={} OPENBLAS_L2_SIZE={}\n",
      TORCH_VERSION, cpu_model(), options.rounds, env_or("ATEN_CPU_CAPABILITY", "(unset)"),
      env_or("OPENBLAS_CORETYPE", "(unset)"), env_or("OPENBLAS_L2_SIZE", "(unset)"));

  const double peak = tessera::bench::fma_peak_gflops();
  std::cout << fmt::format("float32 FMA peak of one thread, measured: {:.1f} GFLOP/s\n", peak);

  int over_target = 0;
  int wrong = 0;
  for (int threads : options.threads) {
    tessera::set_num_threads(threads);
    torch::set_num_threads(threads);
    const bool openblas = set_openblas_threads(threads);
    std::cout << fmt::format("\n{} thread{} (libtorch's OpenBLAS: {})\n", threads,
                             threads == 1 ? "" : "s",
                             openblas ? fmt::format("{} threads", threads) : "not found");
    std::cout << fmt::format("| {:<58} | {:>11} | {:>11} | {:>6} | {:>6} | {:>6} | {:>9} |\n",
                             "case", "Tessera", "libtorch", "ratio", "target", "rounds",
                             "rel diff");
    std::cout << fmt::format("|{:-<60}|{:-<13}|{:-<13}|{:-<8}|{:-<8}|{:-<8}|{:-<11}|\n", "", "", "",
                             "", "", "", "");
    const auto selected = [&](const vs::Case& c) {
      return options.filter.empty() || c.name.find(options.filter) != std::string::npos;
    };
    // Note [One-time choices before the peer runs]
    // Tessera's first product of a shape class times its GEMM backends and keeps the fastest for
    // the rest of the process (Note [CPU float32 GEMM choice] in kernels/cpu/linalg.cpp). Made
    // inside time_case, that trial came right after the previous case's libtorch samples, while
    // the OpenBLAS workers under libtorch could still spin beside it (Note [Each sample in its
    // own steady state]). In 4 of 20 processes (`--threads 2 --filter "MLP part: X"`) some of
    // the two-thread X^T dH trial's runs took 4-9 ms where they take 0.85-1.2, and 3 of them
    // kept OpenBLAS or oneDNN, ~20% slower on it than the tiles for the whole run (full run AM:
    // 1.021 ms, against 0.82 in run AN). A program of Tessera alone makes that choice with no
    // such neighbour, so each selected case's Tessera side runs once here, before libtorch runs
    // at these threads: in 10 of 10 processes after, X^T dH ran at 0.81-0.88 ms.
    for (const vs::Case& c : cases) {
      if (selected(c)) c.tessera();
    }
    std::vector<std::pair<const vs::Case*, vs::CaseTiming>> with_products, memory_bound, over;
    for (const vs::Case& c : cases) {
      if (!selected(c)) continue;
      const vs::CaseTiming t = vs::time_case(c, options.rounds);
      if (c.product_flops > 0) with_products.emplace_back(&c, t);
      if (c.plain_loop) memory_bound.emplace_back(&c, t);
      const double diff = c.max_rel_diff();
      // float32 results of differently ordered sums; bfloat16 GEMMs round their outputs to 8 bits.
      const bool agrees = diff <= (c.name.find("bf16") != std::string::npos ? 2e-2 : 1e-4);
      const bool met = t.ratio <= c.target;
      if (!met) over.emplace_back(&c, t);
      wrong += agrees ? 0 : 1;
      std::cout << fmt::format(
          "| {:<58} | {:>11} | {:>11} | {:>5.2f}{} | {:>6.2f} | {:>6} | {:>8.1e}{} |\n", c.name,
          seconds(t.tessera_s), seconds(t.libtorch_s), t.ratio, met ? " " : "*", c.target,
          fmt::format("{}/{}", t.rounds_within_target, t.rounds), diff, agrees ? " " : "!");
      std::cout.flush();
    }
    print_sign_tests(over);
    over_target += static_cast<int>(over.size());
    print_floors(with_products, peak * threads);
    print_memory_rates(memory_bound);
  }
  std::cout << fmt::format(
      "\n* over target: {} row(s); ! results differ beyond float32 rounding: {} row(s)\n",
      over_target, wrong);
  return wrong == 0 ? 0 : 1;
}
