#pragma once
// What took CPU time away from tessera-shardbench while it ran: the hypervisor, for other guests
// (steal), and other processes on this machine. Either makes two runs of the same strategy
// differ, so the report prints both beside the figures they disturbed and warns when one is
// large (run_warnings).

#include <optional>

namespace tessera::shardbench {

// CPU time in seconds, summed over the cores this process may run on (its affinity): /proc/stat's
// total (idle included), its busy part (user, nice, system, irq, softirq), its steal, and this
// process's own (getrusage: every thread's user and system time).
struct CpuTimes {
  double total = 0.0, busy = 0.0, steal = 0.0, self = 0.0;
};

// Shares of all CPU time over an interval, each in [0, 1].
struct CpuLoad {
  double steal = 0.0;
  double others = 0.0;  // busy time that was not this process's
};

// Between two readings; nullopt when no time passed between them.
std::optional<CpuLoad> cpu_load_between(const CpuTimes& start, const CpuTimes& end);

// nullopt where /proc/stat is unreadable.
std::optional<CpuTimes> read_cpu_times();

class CpuLoadMeter {
 public:
  CpuLoadMeter();  // starts the interval
  // Since construction; nullopt where /proc/stat is unreadable. `job_cpu_s`: the CPU time the
  // job's other processes on this host took in the interval (a launched run's other ranks),
  // which is not another process's either.
  std::optional<CpuLoad> load(double job_cpu_s = 0.0) const;

 private:
  std::optional<CpuTimes> start_;
};

}  // namespace tessera::shardbench
