#pragma once
// The nccl backend's entry point for one process driving several GPUs (dist::run_threads), beside
// init_process_group({.backend = "nccl"}) for launched jobs (see Note [NCCL bootstrap]).
//
// Note [NCCL bootstrap]
// NCCL communicators meet through a unique id that one rank creates and every rank must receive:
// - init_process_group({.backend = "nccl"}) under mpirun / srun: the id travels over the mpi
//   world (a build with MPI is required); rank r uses CUDA device (local rank) % device count.
//   Without a launcher it makes a world of one rank on cuda:0.
// - new_nccl_group(group) inside dist::run_threads: the id travels over the threads group.
// Either way a machine without a CUDA device gets DeviceError, and a build without NCCL gets
// NotSupportedError.

#include <optional>

#include "tessera/collectives/process_group.h"

namespace tessera::dist {

// Collective over `group` (a CPU group of the threads or mpi backend): a nccl group with the same
// members and ranks, on CUDA device `device_index` (default: group rank % cuda_device_count(),
// so run_threads(n, ...) puts one rank on each of n GPUs) and with group's default timeout.
// Errors: DeviceError without a CUDA device; NotSupportedError in a build without NCCL;
// CommError when NCCL's setup fails (network, peers), Error on invalid usage (two ranks on one
// GPU).
ProcessGroupPtr new_nccl_group(const ProcessGroupPtr& group,
                               std::optional<int> device_index = std::nullopt);

}  // namespace tessera::dist
