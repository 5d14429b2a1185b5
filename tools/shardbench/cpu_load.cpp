#include "tools/shardbench/cpu_load.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera::shardbench {

namespace {

double seconds_of(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
}

}  // namespace

// /proc/stat's lines "cpuN user nice system idle iowait irq softirq steal guest guest_nice" in
// clock ticks (guest time is already counted in user), summed over the CPUs this process may run
// on: on a machine shared through CPU sets the others' cores are none of its business.
std::optional<CpuTimes> read_cpu_times() {
  std::ifstream in("/proc/stat");
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const bool pinned = sched_getaffinity(0, sizeof mine, &mine) == 0;
  CpuTimes t;
  for (std::string line; tick > 0 && std::getline(in, line);) {
    int cpu = -1;
    if (line.rfind("cpu", 0) != 0 || std::sscanf(line.c_str(), "cpu%d", &cpu) != 1) continue;
    if (cpu < 0 || cpu >= CPU_SETSIZE || (pinned && !CPU_ISSET(cpu, &mine))) continue;
    std::istringstream fields(line.substr(line.find(' ')));
    double value = 0;
    for (int i = 0; i < 8 && fields >> value; ++i) {
      t.total += value / tick;
      if (i == 0 || i == 1 || i == 2 || i == 5 || i == 6) t.busy += value / tick;
      if (i == 7) t.steal += value / tick;
    }
  }
  if (t.total <= 0) return std::nullopt;
  rusage self{};
  if (getrusage(RUSAGE_SELF, &self) == 0) {
    t.self = seconds_of(self.ru_utime) + seconds_of(self.ru_stime);
  }
  return t;
}

std::optional<CpuLoad> cpu_load_between(const CpuTimes& start, const CpuTimes& end) {
  const double total = end.total - start.total;
  if (total <= 0) return std::nullopt;
  // /proc/stat counts in ticks and getrusage exactly: over a short interval this process's own
  // time can exceed the busy ticks, which is no one else's.
  const double others = (end.busy - start.busy) - (end.self - start.self);
  return CpuLoad{std::clamp((end.steal - start.steal) / total, 0.0, 1.0),
                 std::clamp(others / total, 0.0, 1.0)};
}

CpuLoadMeter::CpuLoadMeter() : start_(read_cpu_times()) {}

std::optional<CpuLoad> CpuLoadMeter::load(double job_cpu_s) const {
  std::optional<CpuTimes> now = read_cpu_times();
  if (!start_ || !now) return std::nullopt;
  now->self += job_cpu_s;
  return cpu_load_between(*start_, *now);
}

}  // namespace tessera::shardbench
