#pragma once
// The entry points of a distributed program: the world of a launched job, or in-process ranks.
//
// Note [Collective backends]
// threads: every rank is a thread of this process (run_threads). Ranks read each other's tensors
//   directly, so data moves once. Arguments are always checked across ranks (an Error on every
//   rank on disagreement). When a rank's function throws, its world is aborted: every other
//   rank's pending or next collective raises CommError, and run_threads rethrows the first
//   failure. A rank whose function returned fails the collectives that wait for it; a collective
//   past its timeout raises CommError and fails its group for the other members.
// mpi: one process per rank (mpirun -n N prog). Data moves with MPI calls; reductions run
//   Tessera's own loops (MPI knows neither bfloat16 / float16 nor Avg). Arguments are checked
//   across ranks by default, as on threads: disagreeing ranks (sizes, dtypes, root, reduce op,
//   a barrier facing an all_reduce, a send larger than its recv) all raise the same Error and the
//   group stays usable. The check costs collectives a 24-byte fingerprint (Note [Agreement
//   fingerprints] in call.h) and point to point a swap of signatures. InitOptions::check = false
//   (or TESSERA_DIST_CHECK=0) opts out: disagreeing arguments are then undefined behaviour, as in
//   MPI (wrong data or a hang). An uncaught exception on any rank,
//   or a collective past its timeout, ends the whole job with the rank's message and a non-zero
//   exit (MPI_Abort): a job never hangs on a lost rank.
// nccl: CUDA tensors, stream-ordered, communicators bootstrapped through MPI; needs a build with
//   CUDA and NCCL.

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "tessera/collectives/process_group.h"

namespace tessera::dist {

struct InitOptions {
  // "auto": under a launcher (mpirun / srun, detected from the environment) "nccl" when CUDA is
  // usable and built with NCCL, else "mpi"; without a launcher a single-rank "threads" world.
  std::string backend = "auto";
  // Default timeout of the world's collectives (and of groups split from it).
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // MPI: check every call's arguments across ranks (Note [Collective backends]). false opts
  // out, leaving disagreeing arguments undefined (wrong data or a hang), to save under 1 us per
  // small collective and one shared-memory barrier per large one (bench/RESULTS.md). Groups
  // split from the world inherit it.
  bool check = true;
};

// Whether an MPI launcher (mpirun, mpiexec, srun with PMI) started this process, from the
// variables it sets; then a program joins the launched world with init_process_group(), and
// run_threads says, once, that each launched process runs a copy of its own.
bool started_by_launcher();
// The launched job's process count and this process's rank in it, when a launcher started the
// process and says them (nullopt otherwise).
std::optional<int> launcher_world_size();
std::optional<int> launcher_rank();

// Creates the world of this process and makes it dist::world(). Errors: an unknown backend, a
// backend this build lacks ("nccl" without CUDA, "mpi" without MPI), a second initialization.
ProcessGroupPtr init_process_group(const InitOptions& options = {});
bool is_initialized();
// Drops the world made by init_process_group (MPI itself is finalized at exit).
void destroy_process_group();
// The calling rank's world: its run_threads group inside run_threads, else the one of
// init_process_group. Error when there is none.
ProcessGroupPtr world();

struct ThreadsOptions {
  // Default timeout of the world's collectives (and of groups split from it).
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Raise at once, on every rank, when the ranks wait for each other in collectives none can
  // complete (a rank skipped one, or ranks issued them in different orders), naming what each
  // waits in, instead of after the timeout (Note [Deadlocks among rank threads] in
  // collectives/threads/rendezvous.h). Turn it off when threads other than the rank threads
  // issue collectives: one that has not issued its first yet cannot be seen, and a rank waiting
  // for it would be taken for deadlocked (a world where one has issued turns it off itself).
  bool detect_deadlocks = true;
  // Say once, when an MPI launcher started this process, that every launched process runs its
  // own copy on rank threads. Off in a program that already decided what to do under a launcher
  // (tessera-shardbench runs in the launcher's rank 0 alone and says so).
  bool warn_if_launched = true;
};

// Runs fn(world) once per rank, each rank a thread of this process, and returns when all have
// returned; rethrows the first rank's exception. Each rank thread gets max(1, hardware threads /
// world_size) intra-op threads, and dist::world() is its world group.
void run_threads(int world_size, const std::function<void(ProcessGroupPtr world)>& fn,
                 const ThreadsOptions& options = {});

}  // namespace tessera::dist
