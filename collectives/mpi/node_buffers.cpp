#include "tessera/collectives/mpi/node_buffers.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>

#include "tessera/collectives/mpi/mpi_runtime.h"

namespace tessera::dist::detail {

namespace {

bool all_on_one_machine(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  TS_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int node_size = 0;
  int size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_size(comm, &size);
  MPI_Comm_free(&node);
  // Every rank sees the same answer: if one rank's machine lacks a peer, so does the peer's.
  return node_size == size;
}

// A name no other group or job uses: the creating process's pid and a per-process counter.
std::array<char, 64> unique_name() {
  static std::atomic<uint64_t> counter{0};
  std::array<char, 64> name{};
  std::snprintf(name.data(), name.size(), "/tessera-%ld-%llu", static_cast<long>(getpid()),
                static_cast<unsigned long long>(counter++));
  return name;
}

}  // namespace

std::unique_ptr<NodeBuffers> NodeBuffers::create(MPI_Comm comm, size_t slot_bytes) {
  if (!all_on_one_machine(comm)) return nullptr;
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // A fresh object reads as zeros: the arrival counter starts at 0.
  const size_t bytes = kHeaderBytes + static_cast<size_t>(size) * 2 * (kTagBytes + slot_bytes);
  // Rank 0 makes the object and tells the others its name; each maps it; all agree on success.
  std::array<char, 64> name{};
  int fd = -1;
  if (rank == 0) {
    name = unique_name();
    fd = shm_open(name.data(), O_CREAT | O_EXCL | O_RDWR, 0600);
    // posix_fallocate reserves the pages now: a full /dev/shm fails here, cleanly, rather than
    // with SIGBUS at a later first touch.
    if (fd >= 0 && (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
                    posix_fallocate(fd, 0, static_cast<off_t>(bytes)) != 0)) {
      close(fd);
      shm_unlink(name.data());  // ours: O_EXCL created it
      fd = -1;
    }
    if (fd < 0) name[0] = '\0';
  }
  TS_MPI_CHECK(MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, comm));
  if (rank != 0 && name[0] != '\0') fd = shm_open(name.data(), O_RDWR, 0600);
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  int mapped = base != MAP_FAILED ? 1 : 0;
  TS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, comm));
  // Every rank has opened it (or failed to): the name can go; the mappings stay.
  if (rank == 0 && name[0] != '\0') shm_unlink(name.data());
  if (mapped == 0) {
    if (base != MAP_FAILED) munmap(base, bytes);
    return nullptr;
  }
  return std::unique_ptr<NodeBuffers>(
      new NodeBuffers(static_cast<char*>(base), bytes, slot_bytes, size));
}

void NodeBuffers::barrier(uint64_t number) const {
  // Arrivals only grow: barrier number b is complete at (b + 1) * size arrivals. The builtins
  // are lock-free on a naturally aligned 8-byte word, so they work across processes.
  auto* arrivals = reinterpret_cast<uint64_t*>(base_);
  const uint64_t target = (number + 1) * static_cast<uint64_t>(size_);
  __atomic_add_fetch(arrivals, 1, __ATOMIC_SEQ_CST);
  // More ranks than cores is common (oversubscribed jobs): yield after a short spin.
  int spins = 0;
  while (__atomic_load_n(arrivals, __ATOMIC_ACQUIRE) < target) {
    if (spins < 64) {
      ++spins;
    } else {
      sched_yield();
    }
  }
}

NodeBuffers::~NodeBuffers() { munmap(base_, mapped_bytes_); }

}  // namespace tessera::dist::detail
