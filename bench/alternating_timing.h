#pragma once
// Timing an operation beside its reference on every rank of a world, round by round in
// alternating order: this VM's bandwidth drifts by tens of percent over seconds, so timing one
// side after the other measures the drift. Shared by redistribute_bench and tessera-redistribute.

#include <tessera/tessera.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace tessera::bench {

struct PairTiming {
  double op_s;         // median seconds of the operation
  double reference_s;  // median of the references' summed seconds
  double ratio;        // median of the per-round ratios
};

namespace detail {

// Seconds of f with every rank in step (a barrier before and after).
inline double seconds_of(const dist::ProcessGroupPtr& world, const std::function<void()>& f) {
  world->barrier()->wait();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  world->barrier()->wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace detail

// `op` and the references (run one after the other, their times summed) alternate for `rounds`
// rounds, in both orders, after one warm-up call of each; every rank calls it alike.
inline PairTiming time_alternating(const dist::ProcessGroupPtr& world,
                                   const std::function<void()>& op,
                                   const std::vector<std::function<void()>>& references,
                                   int rounds) {
  const auto run_references = [&] {
    double total = 0.0;
    for (const auto& f : references) total += detail::seconds_of(world, f);
    return total;
  };
  op();
  run_references();
  std::vector<double> a, b, ratios;
  for (int i = 0; i < rounds; ++i) {
    double ta = 0.0;
    double tb = 0.0;
    if (i % 2 == 0) {
      ta = detail::seconds_of(world, op);
      tb = run_references();
    } else {
      tb = run_references();
      ta = detail::seconds_of(world, op);
    }
    a.push_back(ta);
    b.push_back(tb);
    if (tb > 0) ratios.push_back(ta / tb);
  }
  return {detail::median(a), detail::median(b), detail::median(ratios)};
}

}  // namespace tessera::bench
