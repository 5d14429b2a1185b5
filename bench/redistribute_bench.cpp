// Redistribute benchmark: 4 ranks on the threads backend, a 64 MiB float32 tensor. For each
// transition: the redistribute's time beside the raw collectives of its plan on the same groups
// and sizes (target <= 1.10x), the peak bytes a rank allocates during it beside its input and
// output shards (target <= input + output + one staging buffer), and the cached planning time
// (target < 2 us).

#include <tessera/tessera.h>

#include <mutex>

#include "bench/alternating_timing.h"
#include "bench/bench_util.h"
#include "tessera/dtensor/debug/raw_collectives.h"
#include "tessera/dtensor/redistribute/plan.h"

namespace ts = tessera;

namespace {

constexpr int kIters = 101;
const ts::Shape kShape{4096, 4096};  // 64 MiB of float32

struct Transition {
  ts::Shape mesh;
  ts::Placements src;
  ts::Placements dst;
};

}  // namespace

int main() {
  const std::vector<Transition> transitions{
      {{4}, {ts::Shard(0)}, {ts::Replicate()}},
      {{4}, {ts::Shard(1)}, {ts::Replicate()}},
      {{4}, {ts::Replicate()}, {ts::Shard(0)}},
      {{4}, {ts::Partial()}, {ts::Replicate()}},
      {{4}, {ts::Partial()}, {ts::Shard(0)}},
      {{4}, {ts::Partial()}, {ts::Shard(1)}},
      {{4}, {ts::Shard(0)}, {ts::Shard(1)}},
      {{2, 2}, {ts::Shard(0), ts::Shard(1)}, {ts::Replicate(), ts::Replicate()}},
      {{2, 2}, {ts::Shard(0), ts::Shard(0)}, {ts::Replicate(), ts::Replicate()}},
      {{2, 2}, {ts::Partial(), ts::Partial()}, {ts::Replicate(), ts::Replicate()}},
      {{2, 2}, {ts::Shard(0), ts::Replicate()}, {ts::Replicate(), ts::Shard(1)}},
  };
  fmt::print(
      "Redistribute benchmark: 4 ranks (threads backend), {} float32 (64 MiB), {} interleaved "
      "rounds: median times, median of the per-round ratios\n\n",
      kShape, kIters);
  fmt::print("  {:<8} {:<24} {:>10} {:>10} {:>7}  {:>10} {:>10} {:>8}  {:>8}\n", "mesh",
             "transition", "time ms", "raw ms", "ratio", "peak MiB", "in+out MiB", "plan ns",
             "steps");
  std::mutex mutex;
  for (const Transition& t : transitions) {
    ts::dist::run_threads(4, [&](ts::dist::ProcessGroupPtr world) {
      ts::set_num_threads(1);
      const ts::DeviceMesh mesh(ts::DeviceType::CPU, t.mesh);
      const ts::Tensor global = ts::ones(kShape);
      const ts::DTensor x = ts::distribute_tensor(global, mesh, t.src);
      const ts::dtensor::RedistributePlan& plan = ts::dtensor::plan_redistribute(x.spec(), t.dst);
      const ts::bench::PairTiming timing = ts::bench::time_alternating(
          world, [&] { x.redistribute(t.dst); }, ts::debug::raw_collectives(x.spec(), plan),
          kIters);
      // Peak bytes allocated by this rank during one redistribute (steady state: cached blocks
      // count only while in use).
      const int64_t before = ts::cpu_allocator_stats().current_bytes;
      ts::reset_peak_cpu_memory_stats();
      int64_t out_bytes = 0;
      {
        const ts::DTensor y = x.redistribute(t.dst);
        out_bytes = y.to_local().numel() * 4;
      }
      const int64_t peak = ts::cpu_allocator_stats().peak_bytes - before;
      const int64_t in_bytes = x.to_local().numel() * 4;
      const double plan_s =
          ts::bench::time_per_call([&] { ts::dtensor::plan_redistribute(x.spec(), t.dst); }, 20000);
      if (world->rank() != 0) return;
      std::lock_guard<std::mutex> lock(mutex);
      const double mib = 1.0 / (1 << 20);
      fmt::print("  {:<8} {:<24} {:>10.2f} {:>10} {:>7}  {:>10.1f} {:>10.1f} {:>8.0f}  {:>8}\n",
                 fmt::format("{}", t.mesh),
                 fmt::format("{}->{}", ts::to_string(t.src), ts::to_string(t.dst)),
                 timing.op_s * 1e3,
                 timing.reference_s > 0 ? fmt::format("{:.2f}", timing.reference_s * 1e3) : "local",
                 timing.reference_s > 0 ? fmt::format("{:.2f}x", timing.ratio) : "-",
                 static_cast<double>(peak) * mib, static_cast<double>(in_bytes + out_bytes) * mib,
                 plan_s * 1e9, plan.steps.size());
    });
  }
  fmt::print("\n  targets: ratio <= 1.10x; peak <= in + out + one staging buffer; plan < 2 us\n");
  return 0;
}
