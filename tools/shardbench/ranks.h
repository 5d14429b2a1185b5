#pragma once
// Where tessera-shardbench's ranks run: rank threads of this process, or the processes of a
// launched job (mpirun -n N), this process one of them. See Note [One program, both worlds].

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/collectives/dist.h"

namespace tessera::shardbench {

// Note [One program, both worlds]
// The tool's model, strategies, step loop and calibration are written once, against a world
// group: run_ranks(n, fn) calls fn(world) on each of n ranks, which are either n rank threads
// of this process (the threads backend, the default) or, once join_launched_world() has run,
// the launched job's processes (MPI; nccl where CUDA is), this process calling fn once as its
// rank. What a measurement gathers from its ranks it gathers with collectives (slowest step, peak
// memory), so the two worlds share that code too. What one device computes (the one-device step,
// the one-thread timings) runs on the root alone: in a launched job the other processes wait for
// it asleep, so that they leave its cores alone. The root (rank 0) prints and writes the files.
// The calibration's collective lines are the root's, broadcast to every process before the
// strategies run: the redistribute planner of every process plans with the same cost model.

// How the run's ranks are laid out, for the report.
struct RankSetup {
  std::string backend = "threads";  // "threads", "mpi", "nccl"
  int64_t ranks = 1;
  int64_t processes = 1;  // 1 for rank threads
  int64_t processes_on_this_host = 1;
  int64_t intra_op_threads = 1;  // per rank
};

// "4 rank threads of one process (threads backend), 1 intra-op thread each".
std::string rank_setup_text(const RankSetup& s);

// Joins the world of the launcher that started this process (dist::init_process_group) and
// gives this process's rank its share of the host's intra-op threads (as run_threads gives each
// rank thread): the threads OMP_NUM_THREADS or the hardware has, divided by the job's processes
// on this host. Called once, by main, when a launcher started several processes.
void join_launched_world();

// Whether the ranks are the processes of a launched job.
bool on_processes();

// The run's layout: on rank threads, `ranks` threads of this process.
RankSetup rank_setup(int64_t ranks);

// Whether this process prints and writes the results: always on rank threads, rank 0's process
// in a launched job.
bool is_root_process();

// fn(world) on each of n ranks (Note [One program, both worlds]). In a launched job n is the
// job's size, and fn runs once, on this process's rank, or 1: a rank of its own, on a rank thread
// of this process (an Error naming --ranks otherwise).
void run_ranks(int64_t n, const std::function<void(const dist::ProcessGroupPtr& world)>& fn);

// f on the root alone; the other processes of a launched job wait for it without spinning.
void on_root(const std::function<void()>& f);

// Every rank's `values` (the same count on every rank), in rank order, on every rank.
std::vector<std::vector<double>> gather_over_ranks(const dist::ProcessGroupPtr& world,
                                                   const std::vector<double>& values);

// The root's `values` on every process of a launched job (the count is the root's); unchanged on
// rank threads, which share them already.
void broadcast_from_root(std::vector<double>& values);

// The job's processes' CPU time (getrusage) on this host, summed, other than this process's: what
// the CPU load meter must not count as another process's. 0 on rank threads.
double job_cpu_seconds_elsewhere_on_host();

}  // namespace tessera::shardbench
