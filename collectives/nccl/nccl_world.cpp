// The nccl backend's entry points: init_process_group's world and new_nccl_group (see Note
// [NCCL bootstrap] in collectives/nccl/nccl.h).

#include <cstdlib>
#include <cstring>
#include <string>

#include "tessera/collectives/backends.h"
#include "tessera/collectives/nccl/nccl.h"
#include "tessera/collectives/nccl/process_group_nccl.h"

namespace tessera::dist {

namespace {

// Same launchers as init.cpp's auto-detection (Open MPI, MPICH / Hydra, PMIx, Slurm's PMI).
bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                          "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

// This process's rank among the ranks of its node, as the launcher reports it.
int local_rank(int fallback) {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                          "MV2_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const char* value = std::getenv(var)) return std::atoi(value);
  }
  return fallback;
}

int require_devices(const char* op) {
  const int count = cuda_device_count();
  TS_CHECK_T(DeviceError, count > 0, "[", op,
             "] the \"nccl\" backend needs a CUDA device, but cuda_device_count() is 0 on this "
             "machine (no GPU, or no CUDA driver); use \"mpi\" or \"threads\" (dist::run_threads) "
             "for CPU tensors");
  return count;
}

// Collective over `bootstrap`: rank 0 creates the unique id, a CPU broadcast carries it to the
// others, and every member joins the communicator on `device`.
ProcessGroupPtr join_nccl(const char* op, ProcessGroup& bootstrap, Device device,
                          std::chrono::milliseconds timeout) {
  ncclUniqueId id{};
  Tensor bytes = Tensor::make_empty({static_cast<int64_t>(sizeof(id))}, kUInt8, Device::cpu());
  if (bootstrap.rank() == 0) {
    TS_NCCL_CHECK(op, ncclGetUniqueId(&id));
    std::memcpy(bytes.data_ptr<uint8_t>(), &id, sizeof(id));
  }
  bootstrap.broadcast(bytes, 0);
  std::memcpy(&id, bytes.data_ptr<uint8_t>(), sizeof(id));
  ncclComm_t comm = nullptr;
  {
    const cuda::DeviceGuard guard(device);
    TS_NCCL_CHECK(op, ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()));
  }
  return std::make_shared<detail::ProcessGroupNccl>(comm, bootstrap.rank(), bootstrap.world_ranks(),
                                                    device, timeout);
}

}  // namespace

ProcessGroupPtr new_nccl_group(const ProcessGroupPtr& group, std::optional<int> device_index) {
  const char* op = "new_nccl_group";
  TS_CHECK(group != nullptr, "[", op, "] needs a group to exchange the NCCL unique id over");
  TS_CHECK(group->backend_name() != "nccl", "[", op, "] needs a CPU group (threads or mpi), got ",
           group->describe());
  const int count = require_devices(op);
  const int index = device_index.value_or(group->rank() % count);
  TS_CHECK_INDEX(index >= 0 && index < count, "[", op, "] device_index ", index,
                 " is not a CUDA device of this machine (valid: 0 to ", count - 1, ")");
  return join_nccl(op, *group, Device::cuda(index), group->default_timeout());
}

namespace detail {

bool nccl_built() { return true; }

ProcessGroupPtr make_nccl_world(const InitOptions& options) {
  const char* op = "init_process_group";
  const int count = require_devices(op);
  if (!launched_by_mpi()) {
    // No launcher: a world of this process alone.
    const ProcessGroupPtr single = make_threads_world(options);
    return join_nccl(op, *single, Device::cuda(0), options.timeout);
  }
  TS_CHECK_T(NotSupportedError, mpi_built(), "[", op,
             "] the \"nccl\" backend bootstraps launched jobs through MPI, but this build of "
             "Tessera has no mpi backend (MPI was not found or TESSERA_MPI=OFF); reconfigure with "
             "TESSERA_MPI=ON, or drive several GPUs from one process with dist::run_threads and "
             "dist::new_nccl_group");
  const ProcessGroupPtr mpi = make_mpi_world(options);
  const Device device = Device::cuda(local_rank(mpi->rank()) % count);
  return join_nccl(op, *mpi, device, options.timeout);
}

}  // namespace detail
}  // namespace tessera::dist
