#pragma once
// Internal: the MPI side of the mpi backend: initialization and finalization, conversion of MPI
// errors, and ending the whole job when a rank fails (see Note [MPI job failure]).

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera::dist::detail {

// Note [MPI job failure]
// A rank that dies or stops answering would leave its peers blocked inside MPI forever. So the
// backend ends the job instead: a terminate handler turns an uncaught exception on any rank into
// MPI_Abort (after printing the rank and the exception's message), and a watchdog thread aborts
// the job when a collective runs past its timeout. mpirun then stops every rank and exits
// non-zero. This is the one place Tessera ends a process: an MPI job has no other way to fail
// its remote ranks.

[[noreturn]] void throw_mpi_error(const char* expr, int code);

// Initializes MPI (asking for MPI_THREAD_MULTIPLE) unless the program already did, installs the
// terminate handler and registers finalization at exit. Returns whether several threads may call
// MPI at once (async collectives then progress on their own threads).
bool ensure_mpi_initialized();

// The type that moves elements of `element_size` bytes.
MPI_Datatype unit_type(size_t element_size);
// A count as MPI's int; Error naming `op` beyond INT_MAX.
int to_mpi_count(int64_t count, const char* op);

// Registers a running collective with the watchdog: if it is still registered at its deadline,
// the job is aborted with a message naming `op` and `where` (which must outlive the scope). The
// scope is its own list node: registering allocates nothing.
struct WatchdogScope {
  WatchdogScope(const char* op, const std::string& where, std::chrono::milliseconds timeout);
  ~WatchdogScope();
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

  const char* op;
  const std::string* where;
  std::chrono::milliseconds timeout;
  std::chrono::steady_clock::time_point deadline;
  WatchdogScope* prev = nullptr;
  WatchdogScope* next = nullptr;
};

}  // namespace tessera::dist::detail

#define TS_MPI_CHECK(expr)                                        \
  do {                                                            \
    const int ts_mpi_rc = (expr);                                 \
    if (ts_mpi_rc != MPI_SUCCESS) [[unlikely]] {                  \
      ::tessera::dist::detail::throw_mpi_error(#expr, ts_mpi_rc); \
    }                                                             \
  } while (0)
