#include "tessera/collectives/nccl/process_group_nccl.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "tessera/runtime/cuda/cuda_check.h"
#include "tessera/runtime/cuda/current_stream.h"

namespace tessera::dist::detail {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kBFloat16:
      return ncclBfloat16;
    case kFloat16:
      return ncclFloat16;
    case kInt32:
      return ncclInt32;
    case kInt64:
      return ncclInt64;
    case kUInt8:
    case kBool:  // bool moves as bytes; its reductions map to Max / Min (see nccl_op)
      return ncclUint8;
  }
  TS_INTERNAL_ASSERT(false, "no NCCL type for ", dtype);
  return ncclUint8;
}

// NCCL reduces bool bytes as uint8: Sum (logical or) is Max, Product (logical and) is Min.
ncclRedOp_t nccl_op(const char* op_name, ReduceOp op, DType dtype) {
  const bool is_bool = dtype == kBool;
  switch (op) {
    case ReduceOp::Sum:
      return is_bool ? ncclMax : ncclSum;
    case ReduceOp::Product:
      return is_bool ? ncclMin : ncclProd;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor: {
      const char* name = op == ReduceOp::BAnd ? "BAnd" : op == ReduceOp::BOr ? "BOr" : "BXor";
      throw NotSupportedError(
          fmt::format("[{}] ReduceOp::{} is not supported by the nccl backend (NCCL has no bitwise "
                      "reductions); use the mpi or threads backend",
                      op_name, name));
    }
  }
  TS_INTERNAL_ASSERT(false, "unknown ReduceOp");
  return ncclSum;
}

void* ptr_of(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) +
         t.storage_offset() * static_cast<int64_t>(t.element_size());
}

size_t count_of(const Tensor& t) { return static_cast<size_t>(t.numel()); }

cudaEvent_t new_event(const char* op) {
  cudaEvent_t event = nullptr;
  TS_CUDA_CHECK(op, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

// A collective queued on the communication stream: see Note [NCCL stream order].
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclComm> comm, Device device, cudaEvent_t done,
           std::vector<Tensor> tensors, const char* op, std::string where,
           std::chrono::milliseconds timeout)
      : comm_(std::move(comm)),
        device_(device),
        done_(done),
        tensors_(std::move(tensors)),
        op_(op),
        where_(std::move(where)),
        timeout_(timeout),
        deadline_(Clock::now() + timeout) {}

  ~NcclWork() override {
    // The tensors may be freed only once NCCL is done with them; an error here was (or will
    // be) reported by the group's next call.
    try {
      std::lock_guard lock(mutex_);
      if (!finished_) finish();
    } catch (...) {
    }
    cudaEventDestroy(done_);
  }

  void wait() override {
    std::lock_guard lock(mutex_);
    if (!finished_) finish();
    if (error_) std::rethrow_exception(error_);
    const cuda::DeviceGuard guard(device_);
    TS_CUDA_CHECK(op_, cudaStreamWaitEvent(cuda::current_cuda_stream(device_.index()), done_, 0));
  }

  bool is_completed() const override {
    std::lock_guard lock(mutex_);
    if (finished_) return true;
    const cuda::DeviceGuard guard(device_);
    return cudaEventQuery(done_) != cudaErrorNotReady;
  }

 private:
  // Polls until the collective completed, failed or timed out (aborting the communicator).
  void finish() {
    const cuda::DeviceGuard guard(device_);
    try {
      for (int spins = 0;; ++spins) {
        const cudaError_t status = cudaEventQuery(done_);
        if (status == cudaSuccess) break;
        if (status != cudaErrorNotReady) TS_CUDA_CHECK(op_, status);
        if (const std::optional<std::string> failure = comm_->failure()) {
          throw CommError(fmt::format("[{}] failed on {}: {}", op_, where_, *failure));
        }
        if (Clock::now() > deadline_) {
          const std::string reason =
              fmt::format("{} did not complete within its timeout of {} ms", op_, timeout_.count());
          comm_->abort(reason);
          throw CommError(fmt::format(
              "[{}] timed out after {} ms on {}: a peer failed, left or did not issue the same "
              "collective; the communicator was aborted",
              op_, timeout_.count(), where_));
        }
        // Short collectives finish within microseconds; longer ones need not burn a core.
        if (spins < 1000) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      }
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_ = true;
    tensors_.clear();
  }

  std::shared_ptr<NcclComm> comm_;
  Device device_;
  cudaEvent_t done_;
  std::vector<Tensor> tensors_;
  const char* op_;
  std::string where_;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  mutable std::mutex mutex_;
  bool finished_ = false;
  std::exception_ptr error_;
};

std::vector<Tensor> tensors_of(const Call& call) {
  std::vector<Tensor> tensors = call.list;
  if (call.in.defined()) tensors.push_back(call.in);
  if (call.out.defined()) tensors.push_back(call.out);
  return tensors;
}

}  // namespace

void throw_nccl_error(ncclResult_t result, const char* op, const char* expr) {
  const std::string message = fmt::format("[{}] {} failed: {} ({})", op, expr,
                                          ncclGetErrorString(result), ncclGetLastError(nullptr));
  switch (result) {
    case ncclUnhandledCudaError:
      throw DeviceError(message);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      throw Error(message);
    default:
      throw CommError(message);
  }
}

NcclComm::~NcclComm() {
  std::lock_guard lock(mutex_);
  // An aborted communicator is already freed; destroying never throws.
  if (!aborted_) ncclCommDestroy(comm_);
}

void NcclComm::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  ncclCommAbort(comm_);
  aborted_ = true;
  reason_ = reason;
}

std::optional<std::string> NcclComm::failure() {
  std::lock_guard lock(mutex_);
  if (aborted_) return "its NCCL communicator was aborted: " + reason_;
  ncclResult_t async_error = ncclSuccess;
  const ncclResult_t result = ncclCommGetAsyncError(comm_, &async_error);
  if (result != ncclSuccess) async_error = result;
  if (async_error == ncclSuccess || async_error == ncclInProgress) return std::nullopt;
  reason_ = fmt::format("NCCL reported an asynchronous error: {} ({})",
                        ncclGetErrorString(async_error), ncclGetLastError(comm_));
  ncclCommAbort(comm_);
  aborted_ = true;
  return reason_;
}

void NcclComm::check_usable(const char* op, const std::string& where) const {
  std::lock_guard lock(mutex_);
  TS_CHECK_T(CommError, !aborted_, "[", op, "] ", where,
             " can no longer communicate: its NCCL communicator was aborted (", reason_, ")");
}

ProcessGroupNccl::ProcessGroupNccl(ncclComm_t comm, int rank, std::vector<int> world_ranks,
                                   Device device, std::chrono::milliseconds default_timeout)
    : ProcessGroup(rank, std::move(world_ranks), default_timeout),
      comm_(std::make_shared<NcclComm>(comm)),
      device_(device),
      stream_(cuda::Stream::create(device)) {
  where_ = fmt::format("{} (rank {} on {})", describe(), rank, device);
}

ProcessGroupNccl::~ProcessGroupNccl() = default;

void ProcessGroupNccl::check_devices(const Call& call) const {
  for (const Tensor& t : tensors_of(call)) {
    TS_CHECK_T(DeviceError, t.device() == device_, "[", call.name(), "] rank ", rank(), " of ",
               describe(), " communicates on ", device_, ", but a tensor is on ", t.device(),
               "; move it with .to(", device_, ")");
  }
}

WorkPtr ProcessGroupNccl::run(Call&& call) {
  const char* op = call.name();
  comm_->check_usable(op, where_);
  check_devices(call);
  if (call.kind == CollectiveKind::AllReduce || call.kind == CollectiveKind::ReduceScatterTensor) {
    nccl_op(op, call.op, call.dtype());  // refuses bitwise ops before anything is queued
  }
  const cuda::DeviceGuard guard(device_);
  const auto comm_stream = static_cast<cudaStream_t>(stream_.handle());
  // See Note [NCCL stream order]: inputs produced on the caller's stream are ready first.
  const cudaEvent_t ready = new_event(op);
  cudaEvent_t done = nullptr;
  try {
    TS_CUDA_CHECK(op, cudaEventRecord(ready, cuda::current_cuda_stream(device_.index())));
    TS_CUDA_CHECK(op, cudaStreamWaitEvent(comm_stream, ready, 0));
    enqueue(call, comm_stream);
    done = new_event(op);
    TS_CUDA_CHECK(op, cudaEventRecord(done, comm_stream));
  } catch (...) {
    cudaEventDestroy(ready);
    if (done != nullptr) cudaEventDestroy(done);
    throw;
  }
  cudaEventDestroy(ready);  // released once the wait it feeds has passed
  auto work =
      std::make_shared<NcclWork>(comm_, device_, done, tensors_of(call), op, where_, call.timeout);
  if (call.async_op) return work;
  work->wait();
  return completed_work();
}

void ProcessGroupNccl::enqueue(const Call& call, cudaStream_t stream) {
  const char* op = call.name();
  const ncclComm_t comm = comm_->get();
  const ncclDataType_t type = nccl_type(call.dtype());
  // Every member knows every count here (members agree on them), so skipping empty transfers
  // is consistent across the group.
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      if (call.in.numel() == 0) return;
      TS_NCCL_CHECK(op, ncclAllReduce(ptr_of(call.in), ptr_of(call.out), count_of(call.in), type,
                                      nccl_op(op, call.op, call.dtype()), comm, stream));
      return;
    case CollectiveKind::Broadcast:
      if (call.in.numel() == 0) return;
      TS_NCCL_CHECK(op, ncclBroadcast(ptr_of(call.in), ptr_of(call.out), count_of(call.in), type,
                                      call.peer, comm, stream));
      return;
    case CollectiveKind::ReduceScatterTensor:
      if (call.out.numel() == 0) return;
      TS_NCCL_CHECK(op, ncclReduceScatter(ptr_of(call.in), ptr_of(call.out), count_of(call.out),
                                          type, nccl_op(op, call.op, call.dtype()), comm, stream));
      return;
    case CollectiveKind::AllGatherIntoTensor:
      if (call.in.numel() == 0) return;
      TS_NCCL_CHECK(op, ncclAllGather(ptr_of(call.in), ptr_of(call.out), count_of(call.in), type,
                                      comm, stream));
      return;
    case CollectiveKind::AllGather:
      // Uneven sizes: one broadcast per rank, fused into one launch by the group.
      TS_NCCL_CHECK(op, ncclGroupStart());
      for (int q = 0; q < size(); ++q) {
        const Tensor& out = call.list[static_cast<size_t>(q)];
        if (out.numel() == 0) continue;
        const void* send = q == rank() ? ptr_of(call.in) : ptr_of(out);
        const ncclResult_t result =
            ncclBroadcast(send, ptr_of(out), count_of(out), type, q, comm, stream);
        if (result != ncclSuccess) {
          ncclGroupEnd();
          throw_nccl_error(result, op, "ncclBroadcast(...)");
        }
      }
      TS_NCCL_CHECK(op, ncclGroupEnd());
      return;
    case CollectiveKind::AllToAllSingle:
      return enqueue_all_to_all(call, stream);
    case CollectiveKind::Gather:
    case CollectiveKind::Scatter:
      return enqueue_gather_scatter(call, stream);
    case CollectiveKind::Send:
      if (call.in.numel() == 0) return;
      TS_NCCL_CHECK(op,
                    ncclSend(ptr_of(call.in), count_of(call.in), type, call.peer, comm, stream));
      return;
    case CollectiveKind::Recv:
      if (call.out.numel() == 0) return;
      TS_NCCL_CHECK(op,
                    ncclRecv(ptr_of(call.out), count_of(call.out), type, call.peer, comm, stream));
      return;
    case CollectiveKind::Barrier:
      if (!barrier_scratch_.defined()) {
        barrier_scratch_ = Tensor::make_empty({1}, kFloat32, device_);
      }
      TS_NCCL_CHECK(op, ncclAllReduce(ptr_of(barrier_scratch_), ptr_of(barrier_scratch_), 1,
                                      ncclFloat32, ncclSum, comm, stream));
      return;
    default:
      TS_INTERNAL_ASSERT(false, "no nccl implementation of ", op);
  }
}

void ProcessGroupNccl::enqueue_all_to_all(const Call& call, cudaStream_t stream) {
  const char* op = call.name();
  const ncclDataType_t type = nccl_type(call.dtype());
  const auto es = static_cast<int64_t>(call.in.element_size());
  auto* in = static_cast<char*>(ptr_of(call.in));
  auto* out = static_cast<char*>(ptr_of(call.out));
  const auto r = static_cast<size_t>(rank());
  std::vector<int64_t> in_offsets(call.in_counts.size()), out_offsets(call.out_counts.size());
  for (size_t q = 1; q < in_offsets.size(); ++q) {
    in_offsets[q] = in_offsets[q - 1] + call.in_counts[q - 1];
    out_offsets[q] = out_offsets[q - 1] + call.out_counts[q - 1];
  }
  if (call.in_counts[r] > 0) {
    TS_CUDA_CHECK(op, cudaMemcpyAsync(out + out_offsets[r] * es, in + in_offsets[r] * es,
                                      static_cast<size_t>(call.in_counts[r] * es),
                                      cudaMemcpyDeviceToDevice, stream));
  }
  TS_NCCL_CHECK(op, ncclGroupStart());
  ncclResult_t result = ncclSuccess;
  for (size_t q = 0; q < call.in_counts.size() && result == ncclSuccess; ++q) {
    if (q == r) continue;
    const int peer = static_cast<int>(q);
    if (call.in_counts[q] > 0) {
      result = ncclSend(in + in_offsets[q] * es, static_cast<size_t>(call.in_counts[q]), type, peer,
                        comm_->get(), stream);
    }
    if (result == ncclSuccess && call.out_counts[q] > 0) {
      result = ncclRecv(out + out_offsets[q] * es, static_cast<size_t>(call.out_counts[q]), type,
                        peer, comm_->get(), stream);
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess) throw_nccl_error(result, op, "ncclSend / ncclRecv");
  if (end != ncclSuccess) throw_nccl_error(end, op, "ncclGroupEnd()");
}

void ProcessGroupNccl::enqueue_gather_scatter(const Call& call, cudaStream_t stream) {
  const char* op = call.name();
  const ncclDataType_t type = nccl_type(call.dtype());
  const bool gather = call.kind == CollectiveKind::Gather;
  const Tensor& local = gather ? call.in : call.out;
  if (rank() != call.peer) {
    if (local.numel() == 0) return;
    TS_NCCL_CHECK(
        op, gather
                ? ncclSend(ptr_of(local), count_of(local), type, call.peer, comm_->get(), stream)
                : ncclRecv(ptr_of(local), count_of(local), type, call.peer, comm_->get(), stream));
    return;
  }
  // The root: its own block is a device copy, the others one send or recv per rank.
  const Tensor& own = call.list[static_cast<size_t>(rank())];
  if (own.numel() > 0 && ptr_of(own) != ptr_of(local)) {
    TS_CUDA_CHECK(op, cudaMemcpyAsync(gather ? ptr_of(own) : ptr_of(local),
                                      gather ? ptr_of(local) : ptr_of(own), own.nbytes(),
                                      cudaMemcpyDeviceToDevice, stream));
  }
  TS_NCCL_CHECK(op, ncclGroupStart());
  ncclResult_t result = ncclSuccess;
  for (int q = 0; q < size() && result == ncclSuccess; ++q) {
    const Tensor& t = call.list[static_cast<size_t>(q)];
    if (q == rank() || t.numel() == 0) continue;
    result = gather ? ncclRecv(ptr_of(t), count_of(t), type, q, comm_->get(), stream)
                    : ncclSend(ptr_of(t), count_of(t), type, q, comm_->get(), stream);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (result != ncclSuccess) throw_nccl_error(result, op, gather ? "ncclRecv" : "ncclSend");
  if (end != ncclSuccess) throw_nccl_error(end, op, "ncclGroupEnd()");
}

ProcessGroupPtr ProcessGroupNccl::split_group(const char* op_name, const std::vector<int>& mine,
                                              bool same_everywhere) {
  comm_->check_usable(op_name, where_);
  const int n = size();
  // Every member's list, as membership flags all-gathered over this group's communicator.
  Tensor flags = Tensor::make_empty({n}, kInt64, Device::cpu());
  flags.zero_();
  auto* f = flags.data_ptr<int64_t>();
  for (int q : mine) f[q] = 1;
  Call call;
  call.kind = CollectiveKind::AllGatherIntoTensor;
  call.in = flags.to(device_);
  call.out = Tensor::make_empty({n, n}, kInt64, device_);
  call.timeout = default_timeout();
  const Tensor all_on_device = call.out;
  run(std::move(call));
  const std::vector<int64_t> all = all_on_device.to_vector<int64_t>();
  std::vector<std::vector<int>> lists(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    for (int j = 0; j < n; ++j) {
      if (all[static_cast<size_t>(q * n + j)] == 1) lists[static_cast<size_t>(q)].push_back(j);
    }
  }
  check_split_agreement(op_name, lists, same_everywhere, *this);
  const auto it = std::find(mine.begin(), mine.end(), rank());
  const bool member = it != mine.end();
  const cuda::DeviceGuard guard(device_);
  ncclComm_t sub = nullptr;
  // Colors are the lists' first ranks, keys the ranks: the new group keeps this group's order.
  TS_NCCL_CHECK(op_name, ncclCommSplit(comm_->get(), member ? mine.front() : NCCL_SPLIT_NOCOLOR,
                                       rank(), &sub, nullptr));
  if (!member) return nullptr;
  std::vector<int> members;
  for (int q : mine) members.push_back(world_ranks()[static_cast<size_t>(q)]);
  return std::make_shared<ProcessGroupNccl>(sub, static_cast<int>(it - mine.begin()),
                                            std::move(members), device_, default_timeout());
}

}  // namespace tessera::dist::detail
