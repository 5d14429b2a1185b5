#include "bench/partial_factor_section.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "bench/memory_rate.h"
#include "tessera/tessera.h"

namespace tessera::bench {

namespace {

using Clock = std::chrono::steady_clock;
namespace ts = ::tessera;

constexpr int kReps = 21;

// Median seconds of f over kReps runs, after one warm-up (buffers and plans in place).
template <typename F>
double median_seconds(F&& f) {
  f();
  std::vector<double> s;
  for (int i = 0; i < kReps; ++i) {
    const auto t0 = Clock::now();
    f();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(s.begin(), s.begin() + kReps / 2, s.end());
  return s[kReps / 2];
}

struct Row {
  double local_mul = 0.0;  // the local multiply of the same shard, plain tensors
  double checked = 0.0;    // P * R, the factor finite: check + multiply + dispatch
  double read = 0.0;       // a plain read loop over the factor
  double reduced = 0.0;    // P * R, the factor holding inf: all_reduce first
};

Row run_row(int64_t n) {
  ts::set_num_threads(1);
  const ts::DeviceMesh mesh(ts::DeviceType::CPU, {4});
  const ts::Tensor x = ts::rand({n});
  const ts::Tensor p = ts::distribute_tensor(x, mesh).redistribute({ts::Partial()});
  const ts::Tensor r = ts::distribute_tensor(ts::rand({n}) + 0.5, mesh);
  ts::Tensor bad_values = ts::rand({n});
  bad_values.data_ptr<float>()[n / 2] = std::numeric_limits<float>::infinity();
  const ts::Tensor bad = ts::distribute_tensor(bad_values, mesh);
  const ts::Tensor p_local = ts::DTensor(p).to_local();
  const ts::Tensor r_local = ts::DTensor(r).to_local();
  Row row;
  row.local_mul = median_seconds([&] { (void)(p_local * r_local); });
  row.checked = median_seconds([&] { (void)(p * r); });
  row.read = median_seconds([&] { read_loop(r_local.data_ptr<float>(), n); });
  row.reduced = median_seconds([&] { (void)(p * bad); });
  return row;
}

}  // namespace

void run_partial_factor_section() {
  fmt::print(
      "4. Partial times Replicate: the factor check (Note [Partial times a factor that is not "
      "finite]), mesh [4], float32 [n], one intra-op thread per rank, median of {} per rank, max "
      "over ranks (us)\n\n",
      kReps);
  fmt::print("  {:>9} {:>11} {:>11} {:>11} {:>11} {:>12}  {}\n", "n", "local mul", "P*R", "check",
             "read loop", "P*R (inf)", "check / read loop");
  for (const int64_t n : {int64_t{1} << 12, int64_t{1} << 16, int64_t{1} << 20}) {
    std::vector<Row> per_rank(4);
    ts::dist::run_threads(4, [&](ts::dist::ProcessGroupPtr world) {
      per_rank[static_cast<size_t>(world->rank())] = run_row(n);
    });
    Row r;
    for (const Row& x : per_rank) {
      r.local_mul = std::max(r.local_mul, x.local_mul);
      r.checked = std::max(r.checked, x.checked);
      r.read = std::max(r.read, x.read);
      r.reduced = std::max(r.reduced, x.reduced);
    }
    // The check is what P * R costs beyond the local multiply (dispatch, ~1-2 us, included).
    const double check = std::max(0.0, r.checked - r.local_mul);
    fmt::print("  {:>9} {:>11.1f} {:>11.1f} {:>11.1f} {:>11.1f} {:>12.1f}  {:.2f}\n", n,
               r.local_mul * 1e6, r.checked * 1e6, check * 1e6, r.read * 1e6, r.reduced * 1e6,
               r.read > 0 ? check / r.read : 0.0);
  }
  fmt::print(
      "\n  (check = P*R - local mul: the factor's read for inf/NaN plus dispatch; 'P*R (inf)' "
      "reduces the Partial first, an all_reduce of n floats)\n\n");
}

}  // namespace tessera::bench
