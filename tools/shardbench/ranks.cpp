#include "tools/shardbench/ranks.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <tessera/tessera.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "tools/launch.h"

namespace tessera::shardbench {

namespace {

// The launched job's world; null on rank threads.
dist::ProcessGroupPtr g_world;
RankSetup g_setup;

// A one-device phase can outlast any collective's default timeout (a large model's one-device
// rounds): the processes waiting for it must not be aborted by their watchdog.
constexpr std::chrono::hours kRootWaitTimeout{24};

double own_cpu_seconds() {
  rusage self{};
  if (getrusage(RUSAGE_SELF, &self) != 0) return 0.0;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(self.ru_utime) + seconds(self.ru_stime);
}

// This host's name as a number that a float64 holds exactly (the processes compare them to find
// those sharing a host).
double host_id() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return static_cast<double>(std::hash<std::string>{}(name) & ((uint64_t{1} << 52) - 1));
}

}  // namespace

void join_launched_world() {
  TS_CHECK(!g_world, "[tessera-shardbench] join_launched_world called twice");
  g_world = dist::init_process_group();
  const std::vector<std::vector<double>> hosts = gather_over_ranks(g_world, {host_id()});
  const double mine = hosts[static_cast<size_t>(g_world->rank())][0];
  g_setup.backend = std::string(g_world->backend_name());
  g_setup.ranks = g_world->size();
  g_setup.processes = g_world->size();
  g_setup.processes_on_this_host =
      std::count_if(hosts.begin(), hosts.end(), [&](const auto& h) { return h[0] == mine; });
  g_setup.intra_op_threads = std::max<int64_t>(
      1, get_num_threads() / std::max<int64_t>(1, g_setup.processes_on_this_host));
  set_num_threads(static_cast<int>(g_setup.intra_op_threads));
}

bool on_processes() { return g_world != nullptr; }

RankSetup rank_setup(int64_t ranks) {
  if (on_processes()) return g_setup;
  RankSetup s;
  s.ranks = ranks;
  s.intra_op_threads = std::max<int64_t>(1, get_num_threads() / std::max<int64_t>(1, ranks));
  return s;
}

std::string rank_setup_text(const RankSetup& s) {
  const std::string threads = fmt::format("{} intra-op thread{} each", s.intra_op_threads,
                                          s.intra_op_threads == 1 ? "" : "s");
  if (s.processes <= 1) {
    return fmt::format("{} rank threads of one process ({} backend), {}", s.ranks, s.backend,
                       threads);
  }
  return fmt::format("{} processes ({} backend, {} on this host), {}", s.processes, s.backend,
                     s.processes_on_this_host, threads);
}

bool is_root_process() { return !on_processes() || g_world->rank() == 0; }

void run_ranks(int64_t n, const std::function<void(const dist::ProcessGroupPtr& world)>& fn) {
  // A run of one rank is a rank's own (a tensor-parallel share timed on a mesh of its own rank):
  // on processes too, each process runs it alone, as one rank thread of its own.
  if (!on_processes() || n == 1) {
    dist::run_threads(
        static_cast<int>(n), [&](dist::ProcessGroupPtr world) { fn(world); },
        tools::rank_threads_options());
    return;
  }
  TS_CHECK(n == g_world->size(), "[tessera-shardbench] a run of ", n,
           " ranks in a launched job of ", g_world->size(),
           " processes: under a launcher the ranks are its processes (leave --ranks out, or "
           "give the job's size)");
  fn(g_world);
}

void on_root(const std::function<void()>& f) {
  if (!on_processes()) {
    f();
    return;
  }
  if (g_world->rank() == 0) f();
  dist::CollectiveOptions options;
  options.async_op = true;
  options.timeout = kRootWaitTimeout;
  const dist::WorkPtr done = g_world->barrier(options);
  while (!done->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  done->wait();  // raises what the barrier failed with
}

std::vector<std::vector<double>> gather_over_ranks(const dist::ProcessGroupPtr& world,
                                                   const std::vector<double>& values) {
  const auto n = static_cast<int64_t>(values.size());
  const Tensor mine = from_vector(values, {n});
  const Tensor all = zeros({world->size() * n}, kFloat64);
  world->all_gather_into_tensor(all, mine)->wait();
  const std::vector<double> flat = all.to_vector<double>();
  std::vector<std::vector<double>> out;
  for (int r = 0; r < world->size(); ++r) {
    out.emplace_back(flat.begin() + r * n, flat.begin() + (r + 1) * n);
  }
  return out;
}

void broadcast_from_root(std::vector<double>& values) {
  if (!on_processes()) return;
  const Tensor count = from_vector(std::vector<int64_t>{static_cast<int64_t>(values.size())}, {1});
  g_world->broadcast(count, 0)->wait();
  values.resize(static_cast<size_t>(count.to_vector<int64_t>()[0]));
  const Tensor t = from_vector(values, {static_cast<int64_t>(values.size())});
  g_world->broadcast(t, 0)->wait();
  values = t.to_vector<double>();
}

double job_cpu_seconds_elsewhere_on_host() {
  if (!on_processes()) return 0.0;
  const std::vector<std::vector<double>> all =
      gather_over_ranks(g_world, {host_id(), own_cpu_seconds()});
  const std::vector<double>& mine = all[static_cast<size_t>(g_world->rank())];
  double sum = 0.0;
  for (int r = 0; r < g_world->size(); ++r) {
    const auto& other = all[static_cast<size_t>(r)];
    if (r != g_world->rank() && other[0] == mine[0]) sum += other[1];
  }
  return sum;
}

}  // namespace tessera::shardbench
