#include "tools/shardbench/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "tools/shardbench/ranks.h"

namespace tessera::shardbench {

namespace {

using Clock = std::chrono::steady_clock;

double time_median(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(t);
}

const dist::CollectiveKind kKinds[] = {
    dist::CollectiveKind::AllReduce, dist::CollectiveKind::AllGatherIntoTensor,
    dist::CollectiveKind::ReduceScatterTensor, dist::CollectiveKind::AllToAllSingle};

// Seconds of one collective of `kind` with whole messages of `bytes` on group g (float32), as a
// step issues them: back to back, each on tensors of its own (the same buffers again would stay
// in the cache, as a step's do not), sixteen calls between barriers (a barrier before each call
// would time the ranks' scheduling on the cores after it, not the collective; four calls still
// did on 4 processes on 2 cores, where the first call after a barrier waits for the ranks the
// scheduler woke last: all_reduce's line read 1.18 ns/byte, the step's 37 replayed alone ran at
// 0.43, and the predictions of the strategies' communication were 2-3x high); the median of 7.
double time_collective(dist::CollectiveKind kind, const dist::ProcessGroupPtr& g, int64_t bytes,
                       const dist::ProcessGroupPtr& world) {
  constexpr int kBackToBack = 16;
  std::vector<std::function<void()>> calls;
  for (int i = 0; i < kBackToBack; ++i) {
    calls.push_back(collective_call(kind, g, bytes / 4, kFloat32, dist::ReduceOp::Sum));
  }
  return time_median(
             [&] {
               world->barrier();
               for (const auto& call : calls) call();
             },
             7) /
         kBackToBack;
}

// Seconds of f on the default intra-op threads and on one: the medians of `pairs` samples of each
// in alternation, so that the machine's drifts weigh on both alike. A sample repeats f until it
// spans kShortestSample (f on many threads may take less, and a rate from a clock reading of a
// few ticks, or of none, is noise or inf). With one default thread both are the same setting,
// timed alike (by where in the pair, not by the thread count: OMP_NUM_THREADS=1 once left the
// default's samples empty, a median of 0 and an infinite GEMM rate).
constexpr double kShortestSample = 200e-6;
struct ThreadTimes {
  double all_s = 0.0, one_s = 0.0;
};
ThreadTimes time_on_threads(const std::function<void()>& f, int pairs) {
  const int threads = get_num_threads();
  f();
  const auto t_warm = Clock::now();
  f();
  const double warm_s = std::chrono::duration<double>(Clock::now() - t_warm).count();
  const int reps = warm_s >= kShortestSample
                       ? 1
                       : static_cast<int>(std::ceil(kShortestSample / std::max(warm_s, 1e-9)));
  std::vector<double> all, one;
  for (int i = 0; i < pairs; ++i) {
    for (const bool on_default : {true, false}) {
      const IntraOpThreadsGuard scope(on_default ? threads : 1);
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) f();
      (on_default ? all : one)
          .push_back(std::chrono::duration<double>(Clock::now() - t0).count() / reps);
    }
  }
  return {median(all), median(one)};
}

// `c` trained under `s` on every one of `ranks` ranks at once, each on its own: each phase's
// times the slowest rank's (by its median over the steps), on the root.
Measurement on_every_rank(const Strategy& s, const ModelConfig& c, const RunOptions& run,
                          int64_t ranks) {
  Measurement slowest;
  run_ranks(ranks, [&](const dist::ProcessGroupPtr& world) {
    const Measurement m = measure(s, c, run, {});
    std::vector<double> mine = {m.forward_s, m.backward_s, m.optimizer_s};
    for (const auto* steps : {&m.forward_steps_s, &m.backward_steps_s, &m.optimizer_steps_s}) {
      mine.insert(mine.end(), steps->begin(), steps->end());
    }
    const std::vector<std::vector<double>> all = gather_over_ranks(world, mine);
    if (world->rank() != 0) return;
    const auto steps_of = [&](const std::vector<double>& figures, size_t phase) {
      const auto first =
          figures.begin() + static_cast<std::ptrdiff_t>(3 + phase * m.forward_steps_s.size());
      return std::vector<double>(first,
                                 first + static_cast<std::ptrdiff_t>(m.forward_steps_s.size()));
    };
    for (const std::vector<double>& f : all) {
      if (f[0] + f[1] > slowest.forward_s + slowest.backward_s) {
        slowest.forward_s = f[0];
        slowest.backward_s = f[1];
        slowest.forward_steps_s = steps_of(f, 0);
        slowest.backward_steps_s = steps_of(f, 1);
      }
      if (f[2] > slowest.optimizer_s) {
        slowest.optimizer_s = f[2];
        slowest.optimizer_steps_s = steps_of(f, 2);
      }
    }
  });
  return slowest;
}

// The root's copy bandwidth and collective lines (on groups of up to `largest_group` ranks) on
// every process of a launched job: the redistribute planner of every process must plan with the
// same cost model (Note [One program, both worlds] in ranks.h).
void share_from_root(dtensor::CostModel& model, int64_t largest_group) {
  if (!on_processes()) return;
  std::vector<double> packed = {model.local_bytes_per_s};
  for (size_t kind = 0; kind < std::size(kKinds); ++kind) {
    for (int64_t g = 1; g <= largest_group; ++g) {
      if (const CollectiveLine* line = model.line(dist::collective_name(kKinds[kind]), g)) {
        packed.insert(packed.end(), {static_cast<double>(kind), static_cast<double>(g),
                                     line->alpha_s, line->beta_s_per_byte});
      }
    }
  }
  broadcast_from_root(packed);
  model.local_bytes_per_s = packed[0];
  for (size_t i = 1; i + 3 < packed.size(); i += 4) {
    model.set_line(dist::collective_name(kKinds[static_cast<size_t>(packed[i])]),
                   static_cast<int64_t>(packed[i + 1]),
                   CollectiveLine{packed[i + 2], packed[i + 3]});
  }
}

bool one_size(const std::vector<double>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [&](double b) { return b == bytes.front(); });
}

// The notes of Calibration::notes for groups of one rank and for lines of one message size.
std::string one_rank_note() {
  return "groups of 1 rank: no communication, their collectives predicted free (not timed)";
}
std::string latency_only_note(int64_t group_size, double bytes,
                              const std::vector<std::string>& lines) {
  return fmt::format(
      "groups of {}: the strategies' messages average at most {:.1f} KB, the one size timed: "
      "latency only, no bandwidth term ({})",
      group_size, bytes / 1e3, fmt::join(lines, ", "));
}

}  // namespace

CollectiveLine fit_alpha_beta(const std::vector<double>& bytes,
                              const std::vector<double>& seconds) {
  TS_CHECK(bytes.size() == seconds.size() && !bytes.empty(),
           "[fit_alpha_beta] needs (bytes, seconds) points of equal count, at least one, got ",
           bytes.size(), " and ", seconds.size());
  const double n = static_cast<double>(bytes.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    sx += bytes[i];
    sy += seconds[i];
    sxx += bytes[i] * bytes[i];
    sxy += bytes[i] * seconds[i];
  }
  CollectiveLine ab;
  if (one_size(bytes)) {
    ab.alpha_s = std::max(0.0, sy / n);
    return ab;
  }
  const double denom = n * sxx - sx * sx;
  ab.beta_s_per_byte = (n * sxy - sx * sy) / denom;
  ab.alpha_s = (sy - ab.beta_s_per_byte * sx) / n;
  if (ab.alpha_s < 0) {
    ab.alpha_s = 0;
    ab.beta_s_per_byte = sxy / sxx;
  }
  ab.beta_s_per_byte = std::max(0.0, ab.beta_s_per_byte);
  return ab;
}

const CollectiveLine& Calibration::line(const std::string& kind, int64_t group_size) const {
  const CollectiveLine* found = model.line(kind, group_size);
  TS_CHECK(found != nullptr, "[tessera-shardbench] no calibration of ", kind, " on groups of ",
           group_size);
  return *found;
}

// The GEMM and a pointwise op on the default intra-op threads and on one. In every round, as the
// rest of the compute: a single probe met a co-tenant's busy spell on a shared 2-core machine and
// read gelu's speedup as 1.04x where the rounds around it ran 1.9x, which put the one-device
// prediction 48% high (the step's non-GEMM work divided by that speedup).
void time_thread_speedups(const ModelConfig& c, ComputeRound& r) {
  const Tensor a = randn({512, 512}), b = randn({512, 512});
  Tensor product = matmul(a, b);
  const ThreadTimes gemm = time_on_threads([&] { product = matmul(a, b); }, 9);
  r.gemm_flops_per_s = 2.0 * 512 * 512 * 512 / gemm.all_s;
  r.gemm_flops_one_thread = 2.0 * 512 * 512 * 512 / gemm.one_s;
  const Tensor act = randn({c.batch * c.seq, mlp_width(c)});
  Tensor out = gelu(act);
  // ~0.1 ms a call on one Zen 4 thread: enough pairs for the medians to span ~20 ms.
  const ThreadTimes pointwise = time_on_threads([&] { out = gelu(act); }, 60);
  r.pointwise_speedup = pointwise.one_s / pointwise.all_s;
}

ComputeRound time_compute(const ModelConfig& c, const RunOptions& run, int64_t ranks,
                          const std::set<TensorParallelShare>& tp_shares) {
  ComputeRound r;
  ModelConfig share = c;
  share.batch = std::max<int64_t>(1, c.batch / ranks);
  on_root([&] { time_thread_speedups(c, r); });
  const IntraOpThreadsGuard one(1);
  on_root([&] {
    r.one_thread = measure(strategy_named("single", 1), c, run, {});
    r.one_thread_share = measure(strategy_named("single", 1), share, run, {});
  });
  r.replicas = on_every_rank(strategy_named("single", 1), share, run, ranks);
  for (const TensorParallelShare& t : tp_shares) {
    ModelConfig rank_model = tensor_parallel_share(c, t.degree, t.parts);
    rank_model.batch = t.batch;
    Strategy own_rank = strategy_named("tp", 2);
    own_rank.mesh_shape = {1};
    r.tp_shares[t] = on_every_rank(own_rank, rank_model, run, ranks);
  }
  return r;
}

void set_compute(Calibration& cal, const ModelConfig& c, int64_t ranks,
                 const std::vector<ComputeRound>& rounds) {
  TS_CHECK(!rounds.empty(), "[tessera-shardbench] set_compute needs at least one round");
  const auto combined = [&](const auto& pick) {
    std::vector<Measurement> ms;
    for (const ComputeRound& r : rounds) ms.push_back(pick(r));
    return combine_rounds(ms);
  };
  const auto fwd_bwd = [](const Measurement& m) { return m.forward_s + m.backward_s; };
  const auto median_of = [&](double ComputeRound::*field) {
    std::vector<double> v;
    for (const ComputeRound& r : rounds) v.push_back(r.*field);
    return median(v);
  };
  cal.gemm_flops_per_s = median_of(&ComputeRound::gemm_flops_per_s);
  cal.gemm_flops_one_thread = median_of(&ComputeRound::gemm_flops_one_thread);
  cal.pointwise_speedup = median_of(&ComputeRound::pointwise_speedup);
  cal.batch = c.batch;
  cal.small_batch = std::max<int64_t>(1, c.batch / ranks);
  cal.one_thread = combined([](const ComputeRound& r) { return r.one_thread; });
  const double whole_s = fwd_bwd(cal.one_thread);
  cal.compute = {};
  if (cal.small_batch < cal.batch) {
    const double share_s =
        fwd_bwd(combined([](const ComputeRound& r) { return r.one_thread_share; }));
    cal.compute.per_sequence_s =
        std::max(0.0, (whole_s - share_s) / static_cast<double>(cal.batch - cal.small_batch));
    cal.compute.fixed_s =
        std::max(0.0, whole_s - cal.compute.per_sequence_s * static_cast<double>(cal.batch));
  } else {
    cal.compute.per_sequence_s = whole_s / static_cast<double>(cal.batch);
  }
  const Measurement replicas = combined([](const ComputeRound& r) { return r.replicas; });
  cal.replicated_compute_s = fwd_bwd(replicas);
  cal.replicated_optimizer_s = replicas.optimizer_s;
  cal.tp_share_s.clear();
  for (const auto& [share, m] : rounds.front().tp_shares) {
    cal.tp_share_s[share] =
        fwd_bwd(combined([&share](const ComputeRound& r) { return r.tp_shares.at(share); }));
  }
}

Calibration calibrate(const std::vector<Shape>& mesh_shapes, int sessions, int64_t largest) {
  Calibration cal;
  cal.cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  on_root([&] {
    const Tensor src = randn({16 << 20});
    Tensor dst = empty({16 << 20});
    const double s = time_median([&] { dst.copy_(src); }, 5);
    cal.model.local_bytes_per_s = 2.0 * static_cast<double>(src.numel() * 4) / s;
  });
  // Over the strategies' message sizes, up to their largest average message: larger ones would
  // leave the last-level cache sooner than a step's and bend the line.
  std::vector<int64_t> sizes;
  for (int64_t part : {64, 16, 4, 1}) sizes.push_back(std::max<int64_t>(16 << 10, largest / part));
  // Rank threads outnumber the cores, and how the scheduler places them holds for a whole run of
  // threads: each session of threads times every line, and the fit takes each size's median over
  // the sessions.
  const std::set<Shape> shapes(mesh_shapes.begin(), mesh_shapes.end());
  bool one_rank_groups = false;
  for (const Shape& shape : shapes) {
    for (int64_t d = 0; d < shape.ndim(); ++d) one_rank_groups = one_rank_groups || shape[d] == 1;
  }
  struct Samples {
    dist::CollectiveKind kind;
    int64_t group_size;
    std::vector<double> bytes;
    std::vector<std::vector<double>> seconds;  // per size, per session
  };
  std::map<std::string, Samples> samples;  // the root's timings (rank 0 alone writes them)
  for (int session = 0; session < sessions; ++session) {
    for (const Shape& shape : shapes) {
      run_ranks(shape.numel(), [&](const dist::ProcessGroupPtr& world) {
        const DeviceMesh mesh(DeviceType::CPU, shape);
        for (int64_t d = 0; d < mesh.ndim(); ++d) {
          const dist::ProcessGroupPtr g = mesh.get_group(d);
          if (g->size() == 1) continue;  // lines of zeros, below
          for (const dist::CollectiveKind kind : kKinds) {
            std::vector<double> xs, ys;
            for (int64_t bytes : sizes) {
              const int64_t whole = bytes / (4 * g->size()) * 4 * g->size();
              xs.push_back(static_cast<double>(whole));
              ys.push_back(time_collective(kind, g, whole, world));
            }
            if (world->rank() != 0) continue;
            const std::string key =
                std::string(dist::collective_name(kind)) + "/" + std::to_string(g->size());
            Samples& k = samples.try_emplace(key, Samples{kind, g->size(), xs, {}}).first->second;
            k.seconds.resize(sizes.size());
            for (size_t i = 0; i < sizes.size(); ++i) k.seconds[i].push_back(ys[i]);
          }
        }
      });
    }
  }
  std::map<int64_t, std::vector<std::string>> latency_only;  // group size -> "kind alpha"
  for (const auto& [key, k] : samples) {
    std::vector<double> medians;
    for (const std::vector<double>& per_session : k.seconds) medians.push_back(median(per_session));
    const CollectiveLine line = fit_alpha_beta(k.bytes, medians);
    cal.model.set_line(dist::collective_name(k.kind), k.group_size, line);
    if (one_size(k.bytes)) {
      latency_only[k.group_size].push_back(
          fmt::format("{} {:.1f} us", dist::collective_name(k.kind), line.alpha_s * 1e6));
    }
  }
  for (const auto& [group_size, lines] : latency_only) {
    cal.notes.push_back(latency_only_note(group_size, static_cast<double>(sizes.front()), lines));
  }
  if (one_rank_groups) {
    for (const dist::CollectiveKind kind : kKinds) {
      cal.model.set_line(dist::collective_name(kind), 1, CollectiveLine{});
    }
    cal.notes.push_back(one_rank_note());
  }
  int64_t largest_group = 1;
  for (const Shape& shape : shapes) largest_group = std::max(largest_group, shape.numel());
  share_from_root(cal.model, largest_group);
  return cal;
}

}  // namespace tessera::shardbench
