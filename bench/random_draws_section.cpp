// Random draws on DTensors cost the local shard (Note [Random ops on distributed tensors] in
// runtime/ops/random.cpp): a rank draws only the Philox counters of the elements it holds, so
// rand_like of a [2048, 1024] float32 DTensor Shard(0) over 4 ranks should take ~1/4 of
// rand_like of the whole tensor on one device, while Replicate draws everything on every rank.
// Shard(1) holds 2048 short runs (one per row) and [S(0), S(1)] on a 2 x 2 mesh 1024: each run is
// filled from its own first counter, which shows what the per-run overhead costs. dropout draws a
// float32 keep-mask and multiplies (the single-device kernel fuses both).
//
// Columns: the rank's DTensor draw; the single-device draw (rand_like / randn_like / dropout of a
// plain tensor) of a tensor of the local shard's size and of the whole global tensor, each on one
// thread; their ratios (medians of the per-round ratios); GB/s of output written by the DTensor
// draw and by the whole single-device draw, beside memcpy of the local shard's bytes (the
// physical reference: a draw writes what a copy writes and reads nothing, or the input for
// dropout). Times are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), the DTensor
// draw's wall time beside them: this machine's 2 cores are shared with other processes, and a
// wall clock counts their preemptions, which a 10 ms draw almost always meets and a 3 ms one
// mostly dodges, so wall-clock medians bias the shard / whole ratio low (measured: the 8 MiB
// draw's wall time 1.4-1.5x its CPU time at load 4.7, alone or interleaved with the other calls).
//
// Timing: a draw takes milliseconds, longer than the time slices that 4 rank threads sharing 2
// cores get, so concurrent ranks would time the scheduler. The ranks take turns instead: one
// rank times its calls while the others wait in a barrier (they block after a 50 us spin:
// collectives/threads/rendezvous.cpp). Draws on these layouts need no collective, so one rank
// may draw alone. Within a turn the four calls alternate round by round in rotating order, so
// drift of this VM's bandwidth hits them alike. Every input is made once and every output comes
// back from the caching allocator already touched after the warm-up calls: first touch of fresh
// memory is very slow on this machine, and it is not what a training step pays. One intra-op
// thread per rank, as the rest of the program. Figures are per-rank medians, then the median over
// ranks (the ranks' turns fall at different moments of the machine's load).

#include "bench/random_draws_section.h"

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace ts = tessera;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 2048;
constexpr int64_t kCols = 1024;
constexpr int kRanks = 4;
constexpr int kWarmup = 2;   // calls of each side before timing: every buffer touched
constexpr int kRounds = 15;  // timed rounds per rank and row
constexpr double kDropoutP = 0.1;

enum class Draw { kRand, kRandn, kDropout };

struct DrawCase {
  Draw draw;
  const char* name;
};

const std::array<DrawCase, 3> kDraws{{
    {Draw::kRand, "rand_like"},
    {Draw::kRandn, "randn_like"},
    {Draw::kDropout, "dropout(0.1)"},
}};

struct Layout {
  const char* label;
  ts::Shape mesh;
  ts::Placements placements;
};

ts::Tensor draw(Draw d, const ts::Tensor& t) {
  switch (d) {
    case Draw::kRand:
      return ts::rand_like(t);
    case Draw::kRandn:
      return ts::randn_like(t);
    case Draw::kDropout:
      return ts::dropout(t, kDropoutP);
  }
  return {};
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Seconds {
  double wall = 0.0;
  double cpu = 0.0;
};

Seconds seconds_of(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_seconds();
  f();
  const double cpu = thread_cpu_seconds() - c0;
  return {std::chrono::duration<double>(Clock::now() - t0).count(), cpu};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The calls of one row, in this order.
enum Call : size_t { kDTensor, kLocal, kGlobal, kMemcpy, kNumCalls };

// One rank's figures for one row: medians of its timed rounds (CPU time, but dt_wall_s).
struct Figures {
  std::array<double, kNumCalls> s{};
  double dt_wall_s = 0.0;
  double dt_over_global = 0.0;
  double dt_over_local = 0.0;
};

Figures time_row(const std::array<std::function<void()>, kNumCalls>& calls) {
  for (int i = 0; i < kWarmup; ++i) {
    for (const auto& f : calls) f();
  }
  std::array<std::vector<double>, kNumCalls> times;
  std::vector<double> dt_wall;
  std::vector<double> vs_global;
  std::vector<double> vs_local;
  for (int r = 0; r < kRounds; ++r) {
    std::array<double, kNumCalls> round{};
    for (size_t j = 0; j < kNumCalls; ++j) {
      const size_t c = (j + static_cast<size_t>(r)) % kNumCalls;  // each call leads in turn
      const Seconds t = seconds_of(calls[c]);
      round[c] = t.cpu;
      if (c == kDTensor) dt_wall.push_back(t.wall);
    }
    for (size_t c = 0; c < kNumCalls; ++c) times[c].push_back(round[c]);
    vs_global.push_back(round[kDTensor] / round[kGlobal]);
    vs_local.push_back(round[kDTensor] / round[kLocal]);
  }
  Figures f;
  for (size_t c = 0; c < kNumCalls; ++c) f.s[c] = median(times[c]);
  f.dt_wall_s = median(dt_wall);
  f.dt_over_global = median(vs_global);
  f.dt_over_local = median(vs_local);
  return f;
}

}  // namespace

namespace tessera::bench {

void run_random_draws_section() {
  const std::vector<Layout> layouts{
      {"S(0)", {4}, {ts::Shard(0)}},
      {"S(1)", {4}, {ts::Shard(1)}},
      {"R", {4}, {ts::Replicate()}},
      {"[S(0),S(1)]", {2, 2}, {ts::Shard(0), ts::Shard(1)}},
  };
  const size_t rows = layouts.size() * kDraws.size();
  std::vector<std::vector<Figures>> per_rank(kRanks, std::vector<Figures>(rows));
  std::vector<ts::Shape> local_shapes(layouts.size());
  const auto t0 = Clock::now();
  ts::dist::run_threads(kRanks, [&](ts::dist::ProcessGroupPtr world) {
    ts::set_num_threads(1);
    ts::manual_seed(0);  // the same global tensor on every rank
    const int rank = world->rank();
    const ts::Tensor global = ts::rand({kRows, kCols});
    for (size_t li = 0; li < layouts.size(); ++li) {
      const Layout& layout = layouts[li];
      const ts::DeviceMesh mesh(ts::DeviceType::CPU, layout.mesh);
      const ts::DTensor dx = ts::distribute_tensor(global, mesh, layout.placements);
      // The single-device draw of the local shard's size draws a plain tensor of that shape.
      const ts::Tensor local = dx.to_local().contiguous();
      if (rank == 0) local_shapes[li] = local.sizes();
      const auto bytes = static_cast<size_t>(local.numel()) * sizeof(float);
      const ts::Tensor src = ts::rand(local.sizes());
      const ts::Tensor dst = ts::empty_like(src);
      for (size_t di = 0; di < kDraws.size(); ++di) {
        const Draw d = kDraws[di].draw;
        const std::array<std::function<void()>, kNumCalls> calls{
            [&] { draw(d, dx); },
            [&] { draw(d, local); },
            [&] { draw(d, global); },
            [&] { std::memcpy(dst.data_ptr<float>(), src.data_ptr<float>(), bytes); },
        };
        for (int turn = 0; turn < kRanks; ++turn) {
          world->barrier()->wait();
          if (rank == turn) {
            per_rank[static_cast<size_t>(rank)][li * kDraws.size() + di] = time_row(calls);
          }
        }
        world->barrier()->wait();
      }
    }
  });
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();

  fmt::print(
      "3. Random draws cost the local shard: [{}, {}] float32 ({} MiB) global, 4 rank threads (1 "
      "intra-op thread each) taking turns; median of {} rounds per rank after {} warm-up calls, "
      "median over ranks (the upper of the middle two)\n",
      kRows, kCols, kRows * kCols * 4 >> 20, kRounds, kWarmup);
  fmt::print(
      "   DT = the rank's draw on the DTensor; 1-dev local / global = the same draw of a plain "
      "tensor of the local shard's size / of the whole tensor, one thread; runs = blocks of "
      "consecutive global indices per rank; GB/s = output bytes written per second; memcpy = "
      "memcpy of the local shard's bytes. Times: the thread's CPU time (other processes share "
      "these cores; a wall clock counts their preemptions, more in long calls), DT wall "
      "beside\n\n");
  fmt::print(
      "  {:<13} {:<12} {:<12} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8}  {:>7} {:>7} {:>7}  {:>8}\n",
      "draw", "layout", "local", "runs", "DT ms", "1-dev", "1-dev", "DT/glob", "DT/loc", "DT",
      "1-dev", "memcpy", "DT wall");
  fmt::print(
      "  {:<13} {:<12} {:<12} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8}  {:>7} {:>7} {:>7}  {:>8}\n", "",
      "", "", "", "", "local ms", "glob ms", "", "", "GB/s", "GB/s", "GB/s", "ms");
  std::vector<double> s0_ratio(kDraws.size());
  for (size_t di = 0; di < kDraws.size(); ++di) {
    for (size_t li = 0; li < layouts.size(); ++li) {
      const size_t row = li * kDraws.size() + di;
      // The median over ranks, not the maximum as elsewhere in the program: the ranks do the
      // same work but time it in turns, at different moments of this shared machine's load, so
      // the maximum would pick the worst moment rather than the slowest rank.
      const auto over_ranks = [&](const std::function<double(const Figures&)>& get) {
        std::vector<double> v;
        for (const auto& rank : per_rank) v.push_back(get(rank[row]));
        return median(v);
      };
      Figures f;
      for (size_t c = 0; c < kNumCalls; ++c) {
        f.s[c] = over_ranks([c](const Figures& x) { return x.s[c]; });
      }
      f.dt_wall_s = over_ranks([](const Figures& x) { return x.dt_wall_s; });
      f.dt_over_global = over_ranks([](const Figures& x) { return x.dt_over_global; });
      f.dt_over_local = over_ranks([](const Figures& x) { return x.dt_over_local; });
      if (li == 0) s0_ratio[di] = f.dt_over_global;
      const ts::Shape& shape = local_shapes[li];
      const auto local_bytes = static_cast<double>(shape.numel()) * 4.0;
      const auto global_bytes = static_cast<double>(kRows * kCols) * 4.0;
      // A rank fills one run per local row when the columns are split, else one in all.
      const int64_t runs = shape[1] == kCols ? 1 : shape[0];
      fmt::print(
          "  {:<13} {:<12} {:<12} {:>5} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f}  {:>7.2f} "
          "{:>7.2f} {:>7.2f}  {:>8.3f}\n",
          kDraws[di].name, layouts[li].label, fmt::format("[{}, {}]", shape[0], shape[1]), runs,
          f.s[kDTensor] * 1e3, f.s[kLocal] * 1e3, f.s[kGlobal] * 1e3, f.dt_over_global,
          f.dt_over_local, local_bytes / f.s[kDTensor] * 1e-9, global_bytes / f.s[kGlobal] * 1e-9,
          local_bytes / f.s[kMemcpy] * 1e-9, f.dt_wall_s * 1e3);
    }
  }
  fmt::print(
      "\n  S(0) on 4 ranks, DTensor draw / single-device draw of the whole tensor, CPU time "
      "(ideal 0.25): rand_like {:.3f}, randn_like {:.3f}, dropout {:.3f}; section {:.1f} s\n\n",
      s0_ratio[0], s0_ratio[1], s0_ratio[2], total_s);
}

}  // namespace tessera::bench
