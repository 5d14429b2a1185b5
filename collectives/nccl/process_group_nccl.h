#pragma once
// Internal: the nccl backend's ProcessGroup (one per rank and group, over its own NCCL
// communicator and communication stream). See Note [NCCL stream order].
//
// Note [NCCL stream order]
// A collective runs on its group's communication stream, which first waits (an event) for the
// work the caller queued on its current stream, so inputs produced there are ready. The Work's
// wait() makes the caller's current stream wait for the collective's completion event, and also
// waits on the host until that event completes or the call's timeout passes, polling NCCL's
// asynchronous error: a lost, failed or late peer then aborts the communicator and raises
// CommError on this rank instead of leaving a stream (and the next .cpu()) blocked forever. The
// Work keeps the call's tensors alive until it completed. Blocking calls wait before returning.
// Point to point runs on the same stream, in order with the group's collectives.

#include <nccl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/collectives/call.h"
#include "tessera/runtime/cuda.h"

namespace tessera::dist::detail {

// TS_NCCL_CHECK("op", expr): the seam where NCCL errors become tessera errors (CommError for
// system, remote and internal failures, DeviceError for CUDA failures, Error for invalid
// arguments or usage), naming the op, the expression and NCCL's message.
[[noreturn]] void throw_nccl_error(ncclResult_t result, const char* op, const char* expr);

#define TS_NCCL_CHECK(op, expr)                                              \
  do {                                                                       \
    const ncclResult_t ts_nccl_result_ = (expr);                             \
    if (ts_nccl_result_ != ncclSuccess) [[unlikely]] {                       \
      ::tessera::dist::detail::throw_nccl_error(ts_nccl_result_, op, #expr); \
    }                                                                        \
  } while (0)

// An NCCL communicator, shared by its group and the group's Works. abort() is final: later
// calls on the group raise CommError with the reason.
class NcclComm {
 public:
  explicit NcclComm(ncclComm_t comm) : comm_(comm) {}
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // The communicator; valid while the group holds it and it was not aborted (check_usable).
  ncclComm_t get() const { return comm_; }
  void abort(const std::string& reason);
  // Why the communicator can no longer be used: aborted before, or an asynchronous NCCL error
  // now (which aborts it). Never touches a freed communicator.
  std::optional<std::string> failure();
  // CommError naming `op` and `where` once aborted.
  void check_usable(const char* op, const std::string& where) const;

 private:
  ncclComm_t comm_;
  mutable std::mutex mutex_;
  bool aborted_ = false;
  std::string reason_;
};

class ProcessGroupNccl final : public ProcessGroup {
 public:
  ProcessGroupNccl(ncclComm_t comm, int rank, std::vector<int> world_ranks, Device device,
                   std::chrono::milliseconds default_timeout);
  ~ProcessGroupNccl() override;

  std::string_view backend_name() const override { return "nccl"; }

 protected:
  DeviceType device_type() const override { return DeviceType::CUDA; }
  WorkPtr run(Call&& call) override;
  ProcessGroupPtr split_group(const char* op_name, const std::vector<int>& mine,
                              bool same_everywhere) override;

 private:
  // Queues the NCCL calls of `call` on `stream` (the communication stream).
  void enqueue(const Call& call, cudaStream_t stream);
  void enqueue_all_to_all(const Call& call, cudaStream_t stream);
  void enqueue_gather_scatter(const Call& call, cudaStream_t stream);
  void check_devices(const Call& call) const;

  std::shared_ptr<NcclComm> comm_;
  Device device_;
  cuda::Stream stream_;
  std::string where_;
  Tensor barrier_scratch_;  // one float reduced by barrier()
};

}  // namespace tessera::dist::detail
