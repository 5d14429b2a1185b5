// Bus bandwidth of the collectives (nccl-tests definitions) on 4 ranks, 4 KiB to 256 MiB:
//   collectives_bench                                      threads backend beside memcpy
//   mpirun -n 4 --oversubscribe collectives_bench          mpi backend beside the raw MPI calls
//   mpirun -n 4 --oversubscribe collectives_bench check    mpi backend checked (the default)
//                                                          beside check = false, to 64 MiB
// plus small-message latency. Sizes are nccl-tests' "size": the tensor of all_reduce and
// broadcast, the gathered output of all_gather, the input of reduce_scatter and all_to_all.
// busbw = size / time x {all_reduce: 2(n-1)/n, all_gather, reduce_scatter, all_to_all: (n-1)/n,
// broadcast: 1}: the bytes each rank's link must carry, so busbw compares with one link's speed.
// On the threads backend the link is memory: the reference is the memcpy bandwidth of one rank
// while all ranks copy at once (each rank copies its own buffers, timed like a collective). An
// out-of-place all_gather or all_to_all also copies the rank's own block, so its busbw is at most
// (n-1)/n of that; the in-place all_gather (input = this rank's block of the output) is not.
//
// Buffers are allocated and touched once at the largest size and reused (fresh pages are slow);
// each measurement runs one warm-up call and then six alternating batches of each side.

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "tessera/tessera.h"

#if __has_include(<mpi.h>)
#include <mpi.h>
#define TESSERA_BENCH_RAW_MPI 1
// For the unchecked twin of the world (run_check_cost).
#include "tessera/collectives/mpi/process_group_mpi.h"
#endif

namespace {

namespace dist = tessera::dist;
using tessera::Tensor;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 4;
constexpr int64_t kMinBytes = int64_t{4} << 10;
constexpr int64_t kMaxBytes = int64_t{256} << 20;
constexpr double kTargetSeconds = 0.2;
constexpr int64_t kBatches = 6;

struct Op {
  const char* name;
  double bus_factor;  // busbw / algbw for kRanks ranks
};
constexpr double kN = kRanks;
const std::vector<Op> kOps = {
    {"all_reduce", 2 * (kN - 1) / kN},        {"all_gather", (kN - 1) / kN},
    {"reduce_scatter", (kN - 1) / kN},        {"all_to_all", (kN - 1) / kN},
    {"all_gather (in place)", (kN - 1) / kN}, {"broadcast", 1.0}};

// One rank's buffers (float32, zero: repeated sums stay finite).
struct Buffers {
  Tensor in;
  Tensor out;
  explicit Buffers(int64_t bytes) {
    for (Tensor* t : {&in, &out}) {
      *t = Tensor::make_empty({bytes / 4}, tessera::kFloat32, tessera::Device::cpu());
      std::memset(t->raw_data(), 0, t->nbytes());
    }
  }
  Tensor head(const Tensor& t, int64_t bytes) const { return t.narrow(0, 0, bytes / 4); }
};

// Runs one collective of `bytes` on this rank.
using Body = std::function<void(int64_t bytes)>;

// Tessera's collective for op `index` on `pg`; its tensor views are made here, once, as the raw
// MPI calls take plain pointers.
Body tessera_body(size_t index, const dist::ProcessGroupPtr& pg, const Buffers& b, int64_t bytes) {
  const Tensor in = b.head(b.in, bytes);
  const Tensor out = b.head(b.out, bytes);
  const Tensor in_block = b.head(b.in, bytes / kRanks);
  const Tensor out_block = b.head(b.out, bytes / kRanks);
  const int64_t block = bytes / 4 / kRanks;
  const Tensor my_block = b.out.narrow(0, pg->rank() * block, block);
  switch (index) {
    case 0:
      return [=](int64_t) { pg->all_reduce(in); };
    case 1:
      return [=](int64_t) { pg->all_gather_into_tensor(out, in_block); };
    case 2:
      return [=](int64_t) { pg->reduce_scatter_tensor(out_block, in); };
    case 3:
      return [=](int64_t) { pg->all_to_all_single(out, in); };
    case 4:
      return [=](int64_t) { pg->all_gather_into_tensor(out, my_block); };
    default:
      return [=](int64_t) { pg->broadcast(in, 0); };
  }
}

struct Timing {
  double a;  // seconds per call of the first body
  double b;  // of the second
};

// Seconds per call of `calls` calls of body at `bytes`, between barriers.
double seconds_per_call(const dist::ProcessGroupPtr& pg, const Body& body, int64_t bytes,
                        int64_t calls) {
  pg->barrier();
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < calls; ++i) body(bytes);
  pg->barrier();
  return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(calls);
}

// Seconds per call of two bodies at `bytes`, as rank 0 sees them. Their batches alternate (in
// both orders) and the best batch of each counts, so that a change in the machine's load (it may be
// shared) hits both alike. Each batch is as many calls as fit in a slice of kTargetSeconds (at
// least one); all ranks run the same counts, chosen by rank 0 from the warm-up calls.
Timing time_pair(const dist::ProcessGroupPtr& pg, const Body& a, const Body& b, int64_t bytes) {
  const auto seconds = [&](const Body& body, int64_t calls) {
    return seconds_per_call(pg, body, bytes, calls);
  };
  const double warm = std::max(seconds(a, 1), seconds(b, 1));
  Tensor plan = Tensor::make_empty({2}, tessera::kInt64, tessera::Device::cpu());
  int64_t* p = plan.data_ptr<int64_t>();
  // Never fewer than kBatches batches, even when one call outlasts the target: the best of one
  // sample each would compare two draws of this machine's noise.
  p[1] = kBatches;
  p[0] = std::clamp<int64_t>(
      static_cast<int64_t>(kTargetSeconds / 2 / static_cast<double>(p[1]) / warm), 1, 2000);
  pg->broadcast(plan, 0);
  Timing best{1e30, 1e30};
  for (int64_t batch = 0; batch < p[1]; ++batch) {  // a b, b a, a b, ...: no order favoured
    if (batch % 2 == 0) best.a = std::min(best.a, seconds(a, p[0]));
    best.b = std::min(best.b, seconds(b, p[0]));
    if (batch % 2 == 1) best.a = std::min(best.a, seconds(a, p[0]));
  }
  return best;
}

std::string size_name(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

double gbps(int64_t bytes, double seconds, double factor) {
  return static_cast<double>(bytes) / seconds * factor / 1e9;
}

// Prints one table per op: Tessera's busbw beside the reference's, and the ratio.
// `results[op][size]` = {tessera seconds, reference seconds, reference factor}.
struct Row {
  int64_t bytes;
  double tessera_s;
  double reference_s;
};

// Prints one table per op (Tessera's busbw beside the reference's, and the ratio), then a line
// per op: the geometric mean of its ratios over the sizes from min_bytes_for_target up, and the
// lowest. Returns the lowest of those over all ops.
struct Lowest {
  double ratio = 1e30;     // at one size
  double geo_mean = 1e30;  // of one op over the sizes
};

Lowest print_tables(const std::vector<std::vector<Row>>& results, const char* reference,
                    bool reference_is_memcpy, int64_t min_bytes_for_target) {
  Lowest worst;
  std::vector<std::string> summary;
  for (size_t o = 0; o < kOps.size(); ++o) {
    fmt::print("\n{:<22} {:>9} {:>12} {:>14} {:>14} {:>7}\n", kOps[o].name, "size", "time (us)",
               "busbw GB/s", fmt::format("{} GB/s", reference), "ratio");
    double log_sum = 0.0;
    int counted = 0;
    double lowest = 1e30;
    int64_t lowest_at = 0;
    for (const Row& r : results[o]) {
      const double bus = gbps(r.bytes, r.tessera_s, kOps[o].bus_factor);
      // memcpy moves `bytes` per call: its bandwidth is the link speed busbw compares with.
      const double ref =
          gbps(r.bytes, r.reference_s, reference_is_memcpy ? 1.0 : kOps[o].bus_factor);
      const double ratio = bus / ref;
      if (r.bytes >= min_bytes_for_target) {
        log_sum += std::log(ratio);
        ++counted;
        if (ratio < lowest) {
          lowest = ratio;
          lowest_at = r.bytes;
        }
      }
      fmt::print("{:<22} {:>9} {:>12.1f} {:>14.2f} {:>14.2f} {:>6.2f}x\n", "", size_name(r.bytes),
                 r.tessera_s * 1e6, bus, ref, ratio);
    }
    if (counted > 0) {
      worst.ratio = std::min(worst.ratio, lowest);
      worst.geo_mean = std::min(worst.geo_mean, std::exp(log_sum / counted));
      summary.push_back(fmt::format("  {:<22} geometric mean {:.2f}x, lowest {:.2f}x at {}",
                                    kOps[o].name, std::exp(log_sum / counted), lowest,
                                    size_name(lowest_at)));
    }
  }
  fmt::print("\nbusbw / {} from {} up, per op:\n", reference, size_name(min_bytes_for_target));
  for (const std::string& line : summary) fmt::print("{}\n", line);
  return worst;
}

void print_latency(const dist::ProcessGroupPtr& pg, const Buffers& b, bool print) {
  const Tensor tiny = b.head(b.in, 8);
  const Tensor gathered = b.head(b.out, 8 * kRanks);
  const Timing t1 = time_pair(
      pg, [&](int64_t) { pg->barrier(); }, [&](int64_t) { pg->all_reduce(tiny); }, 8);
  const Timing t2 = time_pair(
      pg, [&](int64_t) { pg->broadcast(tiny, 0); },
      [&](int64_t) { pg->all_gather_into_tensor(gathered, tiny); }, 8);
  if (print) {
    fmt::print(
        "\nsmall-message latency ({} backend, {} ranks): barrier {:.1f} us, all_reduce 8 B "
        "{:.1f} us, broadcast 8 B {:.1f} us, all_gather 8 B {:.1f} us\n",
        pg->backend_name(), pg->size(), t1.a * 1e6, t1.b * 1e6, t2.a * 1e6, t2.b * 1e6);
  }
}

std::vector<int64_t> sizes() {
  std::vector<int64_t> s;
  for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) s.push_back(bytes);
  return s;
}

void run_threads_backend() {
  fmt::print("threads backend, {} ranks (threads of this process), float32\n", kRanks);
  std::vector<std::vector<Row>> results(kOps.size());
  dist::run_threads(kRanks, [&](dist::ProcessGroupPtr pg) {
    const Buffers b(kMaxBytes);
    const Body copy = [&](int64_t s) {
      std::memcpy(b.out.raw_data(), b.in.raw_data(), static_cast<size_t>(s));
    };
    for (int64_t bytes : sizes()) {
      for (size_t o = 0; o < kOps.size(); ++o) {
        const Timing t = time_pair(pg, tessera_body(o, pg, b, bytes), copy, bytes);
        if (pg->rank() == 0) results[o].push_back({bytes, t.a, t.b});
      }
    }
    print_latency(pg, b, pg->rank() == 0);
  });
  const Lowest worst = print_tables(results, "memcpy", true, int64_t{16} << 20);
  fmt::print("\nthreads: lowest busbw / memcpy at >= 16 MiB: {:.2f} (target >= 0.70)\n",
             worst.ratio);
}

#ifdef TESSERA_BENCH_RAW_MPI
Body raw_mpi_body(size_t index, const Buffers& b) {
  const auto f = [](const Tensor& t) { return static_cast<float*>(t.raw_data()); };
  switch (index) {
    case 0:
      return [&, f](int64_t s) {
        MPI_Allreduce(MPI_IN_PLACE, f(b.in), static_cast<int>(s / 4), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      };
    case 1:
      return [&, f](int64_t s) {
        MPI_Allgather(f(b.in), static_cast<int>(s / 4 / kRanks), MPI_FLOAT, f(b.out),
                      static_cast<int>(s / 4 / kRanks), MPI_FLOAT, MPI_COMM_WORLD);
      };
    case 2:
      return [&, f](int64_t s) {
        MPI_Reduce_scatter_block(f(b.in), f(b.out), static_cast<int>(s / 4 / kRanks), MPI_FLOAT,
                                 MPI_SUM, MPI_COMM_WORLD);
      };
    case 3:
      return [&, f](int64_t s) {
        MPI_Alltoall(f(b.in), static_cast<int>(s / 4 / kRanks), MPI_FLOAT, f(b.out),
                     static_cast<int>(s / 4 / kRanks), MPI_FLOAT, MPI_COMM_WORLD);
      };
    case 4:
      return [&, f](int64_t s) {
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, f(b.out),
                      static_cast<int>(s / 4 / kRanks), MPI_FLOAT, MPI_COMM_WORLD);
      };
    default:
      return [&, f](int64_t s) {
        MPI_Bcast(f(b.in), static_cast<int>(s / 4), MPI_FLOAT, 0, MPI_COMM_WORLD);
      };
  }
}

void run_mpi_backend() {
  const dist::ProcessGroupPtr pg = dist::init_process_group({.backend = "mpi"});
  if (pg->size() != kRanks) {
    if (pg->rank() == 0) fmt::print("run with mpirun -n {} (got {} ranks)\n", kRanks, pg->size());
    return;
  }
  const bool root = pg->rank() == 0;
  if (root) fmt::print("mpi backend, {} processes, float32, beside the raw MPI calls\n", kRanks);
  std::vector<std::vector<Row>> results(kOps.size());
  const Buffers b(kMaxBytes);
  for (int64_t bytes : sizes()) {
    for (size_t o = 0; o < kOps.size(); ++o) {
      const Timing t = time_pair(pg, tessera_body(o, pg, b, bytes), raw_mpi_body(o, b), bytes);
      if (root) results[o].push_back({bytes, t.a, t.b});
    }
  }
  print_latency(pg, b, root);
  Tensor tiny = b.head(b.in, 8);
  const Timing raw = time_pair(
      pg, [&](int64_t) { MPI_Barrier(MPI_COMM_WORLD); },
      [&](int64_t) {
        MPI_Allreduce(MPI_IN_PLACE, tiny.raw_data(), 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      },
      8);
  if (root)
    fmt::print("raw MPI: barrier {:.1f} us, MPI_Allreduce 8 B {:.1f} us\n", raw.a * 1e6,
               raw.b * 1e6);
  if (root) {
    const Lowest worst = print_tables(results, "raw MPI", false, kMinBytes);
    // Where the backend makes the very MPI call the raw side makes (large all_gather, all_to_all,
    // broadcast), a single size measures 1.0 give or take this machine's run-to-run noise.
    fmt::print(
        "\nmpi: busbw / raw MPI, lowest per-op geometric mean over sizes {:.2f} (target >= 1.0 on "
        "every op); lowest at a single size {:.2f}\n",
        worst.geo_mean, worst.ratio);
  }
}

// Seconds per call of two bodies at `bytes`, and the median over rounds of their ratio: each
// round times a short batch of each, adjacent in time (in alternating order), so that load from
// other processes, which lasts longer than a round, cancels in the round's ratio. For differences
// of a few percent, which the best-of-batches of time_pair cannot resolve on a shared machine.
struct PairedTiming {
  double a;  // median seconds per call
  double b;
  double ratio;  // median of the rounds' a / b
};
PairedTiming time_rounds(const dist::ProcessGroupPtr& pg, const Body& a, const Body& b,
                         int64_t bytes) {
  constexpr double kBatchSeconds = 2e-3;
  constexpr double kTotalSeconds = 0.4;
  const auto seconds = [&](const Body& body, int64_t calls) {
    return seconds_per_call(pg, body, bytes, calls);
  };
  const double warm = std::max(seconds(a, 1), seconds(b, 1));
  Tensor plan = Tensor::make_empty({2}, tessera::kInt64, tessera::Device::cpu());
  int64_t* p = plan.data_ptr<int64_t>();
  p[0] = std::clamp<int64_t>(static_cast<int64_t>(kBatchSeconds / warm), 1, 1000);  // calls
  p[1] = std::clamp<int64_t>(
      static_cast<int64_t>(kTotalSeconds / (2 * static_cast<double>(p[0]) * warm)), 9, 61);
  pg->broadcast(plan, 0);  // every rank runs rank 0's counts
  std::vector<double> ta, tb, ratios;
  for (int64_t round = 0; round < p[1]; ++round) {
    double x = 0.0;
    double y = 0.0;
    if (round % 2 == 0) {
      x = seconds(a, p[0]);
      y = seconds(b, p[0]);
    } else {
      y = seconds(b, p[0]);
      x = seconds(a, p[0]);
    }
    ta.push_back(x);
    tb.push_back(y);
    ratios.push_back(x / y);
  }
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  return {median(ta), median(tb), median(ratios)};
}

// Checked (the default) against check = false on the same ranks: the world and an unchecked
// twin over a copy of its communicator, made directly because a process holds one world. Prints
// per op and size both times and the added cost, then the small-message latencies; targets
// (issue 21): <= 2% from 64 KiB up, <= 1 us on a small collective through shared memory.
void run_check_cost() {
  const dist::ProcessGroupPtr pg = dist::init_process_group({.backend = "mpi"});
  if (pg->size() != kRanks) {
    if (pg->rank() == 0) fmt::print("run with mpirun -n {} (got {} ranks)\n", kRanks, pg->size());
    return;
  }
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const dist::ProcessGroupPtr unchecked = std::make_shared<dist::detail::ProcessGroupMPI>(
      comm, pg->world_ranks(), pg->default_timeout(), /*check=*/false,
      dist::detail::ensure_mpi_initialized());
  const bool root = pg->rank() == 0;
  if (root) {
    fmt::print(
        "mpi backend, {} processes, float32: checked (default) beside check = false; medians "
        "over rounds, \"added\" = median of the rounds' ratios - 1\n",
        kRanks);
  }
  constexpr int64_t kMaxCheckBytes = int64_t{64} << 20;
  const Buffers b(kMaxCheckBytes);
  double worst_large = -1.0;  // highest relative cost from 64 KiB up
  std::string worst_at;
  for (size_t o = 0; o < kOps.size(); ++o) {
    if (root) {
      fmt::print("\n{:<22} {:>9} {:>13} {:>15} {:>8}\n", kOps[o].name, "size", "checked (us)",
                 "unchecked (us)", "added");
    }
    for (int64_t bytes : sizes()) {
      if (bytes > kMaxCheckBytes) break;
      const PairedTiming t = time_rounds(pg, tessera_body(o, pg, b, bytes),
                                         tessera_body(o, unchecked, b, bytes), bytes);
      if (bytes >= (int64_t{64} << 10) && t.ratio - 1.0 > worst_large) {
        worst_large = t.ratio - 1.0;
        worst_at = fmt::format("{} {}", kOps[o].name, size_name(bytes));
      }
      if (root) {
        fmt::print("{:<22} {:>9} {:>13.1f} {:>15.1f} {:>7.1f}%\n", "", size_name(bytes), t.a * 1e6,
                   t.b * 1e6, (t.ratio - 1.0) * 100);
      }
    }
  }
  // Small messages: through shared memory (collectives) and a ping-pong between ranks 0 and 1.
  const Tensor tiny = b.head(b.in, 8);
  const Tensor gathered = b.head(b.out, 8 * kRanks);
  using Small = std::function<void(dist::ProcessGroup&)>;
  const std::vector<std::pair<const char*, Small>> small = {
      {"barrier", [](dist::ProcessGroup& g) { g.barrier(); }},
      {"all_reduce 8 B", [&](dist::ProcessGroup& g) { g.all_reduce(tiny); }},
      {"broadcast 8 B", [&](dist::ProcessGroup& g) { g.broadcast(tiny, 0); }},
      {"all_gather 8 B", [&](dist::ProcessGroup& g) { g.all_gather_into_tensor(gathered, tiny); }},
      {"send/recv 8 B round trip", [&](dist::ProcessGroup& g) {
         if (g.rank() == 0) {
           g.send(tiny, 1);
           g.recv(tiny, 1);
         } else if (g.rank() == 1) {
           g.recv(tiny, 0);
           g.send(tiny, 0);
         }
       }}};
  double worst_small = 0.0;  // most microseconds added to a collective through shared memory
  if (root) {
    fmt::print("\n{:<26} {:>13} {:>15} {:>10}\n", "small messages", "checked (us)",
               "unchecked (us)", "added us");
  }
  for (const auto& [name, call] : small) {
    const Small& f = call;
    const PairedTiming t = time_rounds(
        pg, [&](int64_t) { f(*pg); }, [&](int64_t) { f(*unchecked); }, 8);
    // Added time as the median ratio applied to the unchecked median (robust like the ratio).
    const double added_us = (t.ratio - 1.0) * t.b * 1e6;
    if (std::string_view(name).find("send") == std::string_view::npos) {
      worst_small = std::max(worst_small, added_us);
    }
    if (root) {
      fmt::print("{:<26} {:>13.2f} {:>15.2f} {:>10.2f}\n", name, t.a * 1e6, t.b * 1e6, added_us);
    }
  }
  if (root) {
    // The arithmetic a checked call adds on every rank, apart from any waiting: its fingerprint
    // and the combination of the group's. Single-threaded, so it is measurable under load.
    dist::detail::CallSignature sig;
    sig.kind = dist::CollectiveKind::AllReduce;
    sig.dtype = tessera::kFloat32;
    sig.in_numel = sig.out_numel = 1 << 20;
    volatile uint64_t sink = 0;
    const double fingerprint_s = tessera::bench::time_per_call(
        [&] {
          dist::detail::Fingerprint all = dist::detail::fingerprint_of(sig, 0, kRanks);
          for (int q = 1; q < kRanks; ++q)
            all.combine(dist::detail::fingerprint_of(sig, q, kRanks));
          sink = sink + all.balance;
        },
        100000);
    fmt::print("\n{} fingerprints of an all_reduce signature, made and combined: {:.0f} ns\n",
               kRanks, fingerprint_s * 1e9);
    fmt::print(
        "\nchecking adds at most {:.1f}% from 64 KiB up ({}; target <= 2%) and {:.2f} us to a "
        "small collective through shared memory (target <= 1 us)\n",
        worst_large * 100, worst_at, worst_small);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const bool under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
                            std::getenv("PMI_RANK") != nullptr ||
                            std::getenv("PMIX_RANK") != nullptr;
  if (!under_mpirun) {
    run_threads_backend();
    fmt::print("\n(for the mpi backend: mpirun -n {} --oversubscribe collectives_bench)\n", kRanks);
    return 0;
  }
#ifdef TESSERA_BENCH_RAW_MPI
  if (argc > 1 && std::string_view(argv[1]) == "check") {
    run_check_cost();
  } else {
    run_mpi_backend();
  }
#else
  (void)argc;
  (void)argv;
  fmt::print("this build has no MPI: run without mpirun for the threads backend\n");
#endif
  return 0;
}
