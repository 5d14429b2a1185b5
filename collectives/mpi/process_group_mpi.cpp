#include "tessera/collectives/mpi/process_group_mpi.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <string_view>
#include <thread>

#include "tessera/collectives/backends.h"
#include "tessera/collectives/local_kernels.h"
#include "tessera/runtime/parallel.h"

namespace tessera::dist::detail {

namespace {

// Tags on a group's communicator: user point to point, checked mode's signatures, and the
// messages collectives exchange internally (never matched by a user's recv).
constexpr int kDataTag = 0;
constexpr int kSignatureTag = 1;  // checked mode: the sender's signature
constexpr int kReplyTag = 2;      // checked mode: the receiver's signature
constexpr int kCollectiveTag = 3;
// Up to this size, all_reduce is recursive doubling (log2(n) rounds of whole tensors); above,
// a reduce-scatter then an all-gather (O(size) bytes per rank).
constexpr size_t kSmallAllReduceBytes = 64 * 1024;
// Contributions up to this size go through shared memory when the whole group is on one machine
// (Note [Small collectives through shared memory]); each rank maps two slots of it per group.
constexpr size_t kNodeSlotBytes = 256 * 1024;

bool all_equal(const std::vector<int64_t>& counts) {
  return std::adjacent_find(counts.begin(), counts.end(), std::not_equal_to<>()) == counts.end();
}

std::vector<int> to_counts(const std::vector<int64_t>& counts, const char* op) {
  std::vector<int> out;
  out.reserve(counts.size());
  for (int64_t c : counts) out.push_back(to_mpi_count(c, op));
  return out;
}

std::vector<int> displacements(const std::vector<int>& counts, const char* op) {
  std::vector<int> displs(counts.size());
  int64_t offset = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    displs[q] = to_mpi_count(offset, op);
    offset += counts[q];
  }
  return displs;
}

// Where list element q would start if the list were one buffer in rank order; nullptr when it
// is not laid out that way.
char* common_base(const std::vector<Tensor>& list, const std::vector<int>& displs, size_t es) {
  char* base = nullptr;
  for (size_t q = 0; q < list.size(); ++q) {
    if (list[q].numel() == 0) continue;
    char* b = bytes_of(list[q]) - static_cast<int64_t>(displs[q]) * static_cast<int64_t>(es);
    if (base == nullptr) base = b;
    if (b != base) return nullptr;
  }
  return base;
}

// Combines fingerprints for MPI_Allreduce, as Fingerprint::combine does.
void combine_fingerprints(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const auto* theirs = static_cast<const Fingerprint*>(in);
  auto* ours = static_cast<Fingerprint*>(inout);
  for (int i = 0; i < *length; ++i) ours[i].combine(theirs[i]);
}

// A fingerprint as one MPI element (so that no algorithm splits it) and the op combining them.
// Made once, after MPI_Init; MPI_Finalize frees them.
struct FingerprintMpi {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
};
const FingerprintMpi& fingerprint_mpi() {
  static const FingerprintMpi made = [] {
    static_assert(sizeof(Fingerprint) == 3 * sizeof(uint64_t));
    FingerprintMpi f;
    TS_MPI_CHECK(MPI_Type_contiguous(3, MPI_UINT64_T, &f.type));
    TS_MPI_CHECK(MPI_Type_commit(&f.type));
    TS_MPI_CHECK(MPI_Op_create(&combine_fingerprints, /*commute=*/1, &f.op));
    return f;
  }();
  return made;
}

// One send or recv, and its Work: non-blocking MPI requests, so posting never blocks (an
// isend-then-recv ring works). In checked mode the two sides also swap signatures and both
// raise alike when they disagree; each side's Work then completes only once the other side has
// posted (as on the threads backend).
class P2PWork final : public Work {
 public:
  P2PWork(const Call& call, MPI_Comm comm, int group_size, bool check, std::string where,
          std::vector<int> world_ranks)
      : tensor_(call.kind == CollectiveKind::Send ? call.in : call.out),
        sending_(call.kind == CollectiveKind::Send),
        peer_(call.peer),
        rank_(-1),
        op_(call.name()),
        timeout_(call.timeout),
        where_(std::move(where)),
        world_ranks_(std::move(world_ranks)),
        group_size_(group_size),
        check_(check) {
    MPI_Comm_rank(comm, &rank_);
    const MPI_Datatype type = unit_type(element_size(call.dtype()));
    const int count = to_mpi_count(tensor_.numel(), op_);
    if (check_) {
      mine_ = signature_of(call);
      const auto length = static_cast<size_t>(encoded_signature_length(group_size));
      encoded_mine_.resize(length);
      encoded_theirs_.resize(length);
      encode_signature(mine_, group_size, encoded_mine_.data());
      const int n = static_cast<int>(length);
      TS_MPI_CHECK(MPI_Isend(encoded_mine_.data(), n, MPI_INT64_T, peer_,
                             sending_ ? kSignatureTag : kReplyTag, comm, next_request()));
      TS_MPI_CHECK(MPI_Irecv(encoded_theirs_.data(), n, MPI_INT64_T, peer_,
                             sending_ ? kReplyTag : kSignatureTag, comm, next_request()));
    }
    if (sending_) {
      TS_MPI_CHECK(
          MPI_Isend(bytes_of(tensor_), count, type, peer_, kDataTag, comm, next_request()));
    } else {
      TS_MPI_CHECK(
          MPI_Irecv(bytes_of(tensor_), count, type, peer_, kDataTag, comm, next_request()));
    }
  }

  ~P2PWork() override {
    // MPI may still read or write the tensor: finish before it can be freed.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !done_) wait_each();
  }

  // Note [Completing every request]
  // Each request is completed on its own (MPI_Wait, MPI_Test), not with MPI_Waitall/Testall: when
  // one request fails (the receiver's data request truncated by a larger send), those may return
  // at once and leave the others pending (MPI_ERR_PENDING). A signature receive left pending
  // would then match the next send/recv's signature from the same peer, and that call would wait
  // for a message that never comes. Over TCP alone the data can arrive before the signature: the
  // send/recv agreement test hung in about half its runs so (collectives/mpi_4_ranks_tcp_only).
  void wait() override {
    std::lock_guard lock(mutex_);
    if (!done_) {
      const WatchdogScope watch(op_, where_, timeout_);
      wait_each();
      finish();
    }
    if (error_) std::rethrow_exception(error_);
  }

  bool is_completed() const override {
    std::lock_guard lock(mutex_);
    if (done_) return true;
    bool all = true;
    for (int i = 0; i < num_requests_; ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      const int rc = MPI_Test(&requests_[i], &flag, MPI_STATUS_IGNORE);
      if (flag || rc != MPI_SUCCESS) {
        rcs_[i] = rc;
        requests_[i] = MPI_REQUEST_NULL;
      } else {
        all = false;
      }
    }
    if (all) finish();
    return done_;
  }

 private:
  MPI_Request* next_request() { return &requests_[num_requests_++]; }

  // Waits for every request still pending, each on its own (Note [Completing every request]).
  void wait_each() {
    for (int i = 0; i < num_requests_; ++i) {
      if (requests_[i] != MPI_REQUEST_NULL) {
        rcs_[i] = MPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
        requests_[i] = MPI_REQUEST_NULL;
      }
    }
  }

  // Every request is complete, its result in rcs_.
  void finish() const {
    done_ = true;
    const int64_t numel = tensor_.numel();
    tensor_ = Tensor();
    try {
      // The signature requests come first, the data request last.
      int signature_rc = MPI_SUCCESS;
      for (int i = 0; i + 1 < num_requests_; ++i) {
        if (rcs_[i] != MPI_SUCCESS) signature_rc = rcs_[i];
      }
      const int data_rc = rcs_[num_requests_ - 1];
      if (check_ && signature_rc == MPI_SUCCESS) {
        const CallSignature theirs = decode_signature(encoded_theirs_.data(), group_size_);
        const int src = sending_ ? rank_ : peer_;
        const int dst = sending_ ? peer_ : rank_;
        check_p2p_agreement(op_, sending_ ? mine_ : theirs, sending_ ? theirs : mine_, src, dst,
                            where_, world_ranks_);
      }
      if (signature_rc != MPI_SUCCESS) throw_mpi_error("MPI_Isend/MPI_Irecv", signature_rc);
      if (data_rc == MPI_SUCCESS) return;
      int error_class = data_rc;
      MPI_Error_class(data_rc, &error_class);
      // Unchecked, the receiver alone learns of a larger message, and not its size.
      TS_CHECK_SHAPE(sending_ || error_class != MPI_ERR_TRUNCATE, "[", op_, "] rank ", rank_,
                     " of ", where_, " posted ", numel, " elements but rank ", peer_,
                     " sent more (MPI_ERR_TRUNCATE); with check = true both sides name both sizes");
      throw_mpi_error(sending_ ? "MPI_Isend" : "MPI_Irecv", data_rc);
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  mutable std::mutex mutex_;
  mutable Tensor tensor_;
  bool sending_;
  int peer_;
  int rank_;
  const char* op_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  std::vector<int> world_ranks_;
  int group_size_;
  bool check_;
  CallSignature mine_;
  std::vector<int64_t> encoded_mine_;
  std::vector<int64_t> encoded_theirs_;
  mutable MPI_Request requests_[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  mutable int rcs_[3] = {MPI_SUCCESS, MPI_SUCCESS, MPI_SUCCESS};
  int num_requests_ = 0;
  mutable bool done_ = false;
  mutable std::exception_ptr error_;
};

// Completes every request, each on its own (Note [Completing every request]), and raises the
// first failure only once none is left pending: a request left pending could still write into
// the scratch buffer the next collective uses, or match that collective's messages.
void wait_every_request(std::vector<MPI_Request>& requests) {
  int first_failure = MPI_SUCCESS;
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    const int rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    request = MPI_REQUEST_NULL;
    if (rc != MPI_SUCCESS && first_failure == MPI_SUCCESS) first_failure = rc;
  }
  if (first_failure != MPI_SUCCESS) throw_mpi_error("MPI_Wait", first_failure);
}

}  // namespace

ProcessGroupMPI::ProcessGroupMPI(MPI_Comm comm, std::vector<int> world_ranks,
                                 std::chrono::milliseconds timeout, bool check, bool async_threads)
    : ProcessGroup(
          [comm] {
            int rank = 0;
            MPI_Comm_rank(comm, &rank);
            return rank;
          }(),
          std::move(world_ranks), timeout),
      comm_(comm),
      check_(check),
      async_threads_(async_threads),
      progress_(std::make_shared<ProgressThread>()) {
  TS_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  where_ = describe();
  // TESSERA_MPI_SHARED_MEMORY=0 keeps every collective on MPI (tests cover both paths so).
  const char* shared = std::getenv("TESSERA_MPI_SHARED_MEMORY");
  const bool allowed = shared == nullptr || std::string_view(shared) != "0";
  if (size() > 1 && allowed) node_ = NodeBuffers::create(comm_, kNodeSlotBytes);
}

ProcessGroupMPI::~ProcessGroupMPI() {
  progress_->drain();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

char* ProcessGroupMPI::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

WorkPtr ProcessGroupMPI::run(Call&& call) {
  // Point to point does not queue behind collectives: posting never blocks.
  if (call.kind == CollectiveKind::Send || call.kind == CollectiveKind::Recv) {
    auto work = std::make_shared<P2PWork>(call, comm_, size(), check_, where_, world_ranks());
    if (call.async_op) return work;
    work->wait();
    return completed_work();
  }
  if (!call.async_op || !async_threads_) {
    return progress_->submit([&] { execute(call); }, false);
  }
  auto owned = std::make_shared<Call>(std::move(call));
  return progress_->submit([this, owned] { execute(*owned); }, true);
}

void ProcessGroupMPI::agree_over_mpi(const Call& call) {
  Fingerprint all = fingerprint_of(signature_of(call), rank(), size());
  const FingerprintMpi& f = fingerprint_mpi();
  TS_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all, 1, f.type, f.op, comm_));
  if (!all.agrees()) raise_disagreement(call);
}

void ProcessGroupMPI::raise_disagreement(const Call& call) {
  const CallSignature sig = signature_of(call);
  const int n = size();
  const int64_t length = encoded_signature_length(n);
  std::vector<int64_t> all(static_cast<size_t>(length * n));
  std::vector<int64_t> mine(static_cast<size_t>(length));
  encode_signature(sig, n, mine.data());
  const int count = static_cast<int>(length);
  TS_MPI_CHECK(
      MPI_Allgather(mine.data(), count, MPI_INT64_T, all.data(), count, MPI_INT64_T, comm_));
  std::vector<CallSignature> sigs;
  sigs.reserve(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) sigs.push_back(decode_signature(all.data() + q * length, n));
  check_agreement(sig, sigs, *this);
  TS_INTERNAL_ASSERT(false, "[", call.name(), "] the fingerprints of ", where_,
                     " disagree but the signatures pass check_agreement; fingerprint_of and ",
                     "check_agreement must change together");
}

void ProcessGroupMPI::execute(const Call& call) {
  const WatchdogScope watch(call.name(), where_, call.timeout);
  // Checking comes before any data moves, the same exchange for every kind of call.
  if (node_ != nullptr) {
    if (run_on_node(call)) return;
  } else if (check_ && size() > 1) {
    agree_over_mpi(call);
  }
  const DType dtype = call.dtype();
  const MPI_Datatype type = unit_type(element_size(dtype));
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      return all_reduce(call);
    case CollectiveKind::ReduceScatterTensor: {
      std::vector<int64_t> begins(static_cast<size_t>(size()) + 1);
      for (size_t q = 0; q < begins.size(); ++q)
        begins[q] = static_cast<int64_t>(q) * call.out.numel();
      return reduce_scatter(call, bytes_of(call.in), bytes_of(call.out), begins);
    }
    case CollectiveKind::AllGatherIntoTensor:
    case CollectiveKind::AllGather:
    case CollectiveKind::Gather:
      return gather_like(call);
    case CollectiveKind::Scatter:
      return scatter(call);
    case CollectiveKind::AllToAllSingle:
      return all_to_all(call);
    case CollectiveKind::Broadcast:
      TS_MPI_CHECK(MPI_Bcast(bytes_of(call.in), to_mpi_count(call.in.numel(), call.name()), type,
                             call.peer, comm_));
      return;
    case CollectiveKind::Barrier:
      TS_MPI_CHECK(MPI_Barrier(comm_));
      return;
    default:
      TS_INTERNAL_ASSERT(false, "no mpi implementation of ", call.name());
  }
}

void ProcessGroupMPI::all_reduce(const Call& call) {
  if (bytes_of(call.in) != bytes_of(call.out)) {
    // Out of place (all_reduce_into): reduce a copy of the input in the output.
    copy_bytes(bytes_of(call.out), bytes_of(call.in), call.in.nbytes());
    Call in_place = call;
    in_place.in = call.out;
    return all_reduce(in_place);
  }
  const int n = size();
  if (n == 1) return;  // every op of one value is that value (Avg divides by 1)
  if (call.in.nbytes() <= kSmallAllReduceBytes) return all_reduce_small(call);
  const DType dtype = call.dtype();
  const size_t es = element_size(dtype);
  const int64_t count = call.in.numel();
  char* t = bytes_of(call.in);
  // Equal chunks when they can be (MPI_Allgather is faster than MPI_Allgatherv).
  const bool even = count % n == 0;
  std::vector<int64_t> begins(static_cast<size_t>(n) + 1);
  for (int q = 0; q <= n; ++q) {
    begins[static_cast<size_t>(q)] = even ? q * (count / n) : chunk_begin(count, n, q, es);
  }
  const int r = rank();
  reduce_scatter(call, t, t + begins[static_cast<size_t>(r)] * static_cast<int64_t>(es), begins);
  const MPI_Datatype type = unit_type(es);
  if (even) {
    TS_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t,
                               to_mpi_count(count / n, call.name()), type, comm_));
    return;
  }
  std::vector<int> counts(static_cast<size_t>(n));
  std::vector<int> displs(static_cast<size_t>(n));
  for (size_t q = 0; q < counts.size(); ++q) {
    counts[q] = to_mpi_count(begins[q + 1] - begins[q], call.name());
    displs[q] = to_mpi_count(begins[q], call.name());
  }
  TS_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t, counts.data(), displs.data(),
                              type, comm_));
}

void ProcessGroupMPI::all_reduce_small(const Call& call) {
  const int n = size();
  const int r = rank();
  const DType dtype = call.dtype();
  const DType acc_dtype = accumulator_dtype(dtype);
  const int64_t count = call.in.numel();
  const size_t bytes = static_cast<size_t>(count) * element_size(acc_dtype);
  // Partials travel in the accumulator dtype: float for Half / BFloat16, rounded once at the end.
  const bool separate = acc_dtype != dtype;
  char* buffer = scratch(separate ? 2 * bytes : bytes);
  char* acc = separate ? buffer : bytes_of(call.in);
  char* incoming = separate ? buffer + bytes : buffer;
  to_accumulator(dtype, acc, bytes_of(call.in), count);
  const ReduceOp op = call.op == ReduceOp::Avg ? ReduceOp::Sum : call.op;
  const MPI_Datatype type = unit_type(element_size(acc_dtype));
  const int c = to_mpi_count(count, call.name());
  const auto combine = [&] {
    const void* ins[2] = {acc, incoming};
    reduce_n(acc_dtype, op, acc, ins, 2, count);
  };
  // The ranks past the largest power of two fold into a partner first and get the result last.
  int p = 1;
  while (2 * p <= n) p *= 2;
  const int extra = n - p;
  if (r >= p) {
    TS_MPI_CHECK(MPI_Send(acc, c, type, r - p, kCollectiveTag, comm_));
    TS_MPI_CHECK(MPI_Recv(acc, c, type, r - p, kCollectiveTag, comm_, MPI_STATUS_IGNORE));
  } else {
    if (r < extra) {
      TS_MPI_CHECK(MPI_Recv(incoming, c, type, r + p, kCollectiveTag, comm_, MPI_STATUS_IGNORE));
      combine();
    }
    for (int d = 1; d < p; d *= 2) {
      TS_MPI_CHECK(MPI_Sendrecv(acc, c, type, r ^ d, kCollectiveTag, incoming, c, type, r ^ d,
                                kCollectiveTag, comm_, MPI_STATUS_IGNORE));
      combine();  // op(a, b) == op(b, a) exactly, so both partners hold the same bits
    }
    if (r < extra) TS_MPI_CHECK(MPI_Send(acc, c, type, r + p, kCollectiveTag, comm_));
  }
  from_accumulator(dtype, bytes_of(call.in), acc, count, call.op == ReduceOp::Avg ? n : 1);
}

void ProcessGroupMPI::reduce_scatter(const Call& call, const char* in, char* out,
                                     const std::vector<int64_t>& begins) {
  const int n = size();
  const int r = rank();
  const DType dtype = call.dtype();
  const auto es = static_cast<int64_t>(element_size(dtype));
  const MPI_Datatype type = unit_type(static_cast<size_t>(es));
  const auto chunk = [&](int q) {
    return begins[static_cast<size_t>(q) + 1] - begins[static_cast<size_t>(q)];
  };
  const int64_t mine = chunk(r);
  const int mine_count = to_mpi_count(mine, call.name());
  char* received = scratch(static_cast<size_t>(std::max(0, n - 1) * mine * es));
  // Peer q's chunk r lands in slot (q - r - 1) mod n; staggered partners spread the traffic.
  std::vector<MPI_Request> requests;
  requests.reserve(2 * static_cast<size_t>(n));
  for (int s = 1; s < n; ++s) {
    const int from = (r - s + n) % n;
    const int to = (r + s) % n;
    requests.emplace_back();
    TS_MPI_CHECK(MPI_Irecv(received + (n - s - 1) * mine * es, mine_count, type, from,
                           kCollectiveTag, comm_, &requests.back()));
    requests.emplace_back();
    TS_MPI_CHECK(MPI_Isend(in + begins[static_cast<size_t>(to)] * es,
                           to_mpi_count(chunk(to), call.name()), type, to, kCollectiveTag, comm_,
                           &requests.back()));
  }
  wait_every_request(requests);
  std::vector<const void*> ins(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    const int s = (r - q + n) % n;  // q sent to us in step s
    ins[static_cast<size_t>(q)] =
        q == r ? in + begins[static_cast<size_t>(r)] * es : received + (n - s - 1) * mine * es;
  }
  reduce_n(dtype, call.op, out, ins.data(), n, mine);
}

void ProcessGroupMPI::gather_like(const Call& call) {
  const int n = size();
  const int r = rank();
  const size_t es = element_size(call.dtype());
  const MPI_Datatype type = unit_type(es);
  const bool all = call.kind != CollectiveKind::Gather;
  const bool receives = all || r == call.peer;
  std::vector<int64_t> counts64(static_cast<size_t>(n), call.in.numel());
  if (call.kind != CollectiveKind::AllGatherIntoTensor && receives) {
    for (int q = 0; q < n; ++q)
      counts64[static_cast<size_t>(q)] = call.list[static_cast<size_t>(q)].numel();
  }
  const std::vector<int> counts = to_counts(counts64, call.name());
  const std::vector<int> displs = displacements(counts, call.name());
  const int64_t total = std::accumulate(counts64.begin(), counts64.end(), int64_t{0});
  char* base = nullptr;
  if (receives) {
    base = call.kind == CollectiveKind::AllGatherIntoTensor ? bytes_of(call.out)
                                                            : common_base(call.list, displs, es);
  }
  const bool direct = base != nullptr || total == 0;
  char* recv = receives ? (direct ? base : scratch(static_cast<size_t>(total) * es)) : nullptr;
  const bool in_place =
      receives && direct && call.in.numel() > 0 &&
      bytes_of(call.in) ==
          recv + static_cast<int64_t>(displs[static_cast<size_t>(r)]) * static_cast<int64_t>(es);
  const void* send = in_place ? MPI_IN_PLACE : bytes_of(call.in);
  const int send_count = to_mpi_count(call.in.numel(), call.name());
  if (all && all_equal(counts64)) {
    TS_MPI_CHECK(MPI_Allgather(send, send_count, type, recv, send_count, type, comm_));
  } else if (all) {
    TS_MPI_CHECK(
        MPI_Allgatherv(send, send_count, type, recv, counts.data(), displs.data(), type, comm_));
  } else {
    TS_MPI_CHECK(MPI_Gatherv(send, send_count, type, recv, counts.data(), displs.data(), type,
                             call.peer, comm_));
  }
  if (receives && !direct) {
    for (int q = 0; q < n; ++q) {
      const Tensor& out = call.list[static_cast<size_t>(q)];
      copy_bytes(
          bytes_of(out),
          recv + static_cast<int64_t>(displs[static_cast<size_t>(q)]) * static_cast<int64_t>(es),
          out.nbytes());
    }
  }
}

void ProcessGroupMPI::scatter(const Call& call) {
  const int n = size();
  const size_t es = element_size(call.dtype());
  const MPI_Datatype type = unit_type(es);
  const int recv_count = to_mpi_count(call.out.numel(), call.name());
  if (rank() != call.peer) {
    TS_MPI_CHECK(MPI_Scatterv(nullptr, nullptr, nullptr, type, bytes_of(call.out), recv_count, type,
                              call.peer, comm_));
    return;
  }
  std::vector<int64_t> counts64(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q)
    counts64[static_cast<size_t>(q)] = call.list[static_cast<size_t>(q)].numel();
  const std::vector<int> counts = to_counts(counts64, call.name());
  const std::vector<int> displs = displacements(counts, call.name());
  char* send = common_base(call.list, displs, es);
  if (send == nullptr) {
    const int64_t total = std::accumulate(counts64.begin(), counts64.end(), int64_t{0});
    send = scratch(static_cast<size_t>(total) * es);
    for (int q = 0; q < n; ++q) {
      const Tensor& in = call.list[static_cast<size_t>(q)];
      copy_bytes(
          send + static_cast<int64_t>(displs[static_cast<size_t>(q)]) * static_cast<int64_t>(es),
          bytes_of(in), in.nbytes());
    }
  }
  const auto r = static_cast<size_t>(rank());
  const bool in_place =
      call.out.numel() > 0 &&
      bytes_of(call.out) == send + static_cast<int64_t>(displs[r]) * static_cast<int64_t>(es);
  TS_MPI_CHECK(MPI_Scatterv(send, counts.data(), displs.data(), type,
                            in_place ? MPI_IN_PLACE : bytes_of(call.out), recv_count, type,
                            call.peer, comm_));
}

void ProcessGroupMPI::all_to_all(const Call& call) {
  const MPI_Datatype type = unit_type(element_size(call.dtype()));
  // MPI_Alltoall and MPI_Alltoallv do not match each other: choose from what every rank knows.
  if (call.equal_splits) {
    TS_MPI_CHECK(MPI_Alltoall(bytes_of(call.in), to_mpi_count(call.in_counts[0], call.name()), type,
                              bytes_of(call.out), to_mpi_count(call.out_counts[0], call.name()),
                              type, comm_));
    return;
  }
  const std::vector<int> in_counts = to_counts(call.in_counts, call.name());
  const std::vector<int> out_counts = to_counts(call.out_counts, call.name());
  const std::vector<int> in_displs = displacements(in_counts, call.name());
  const std::vector<int> out_displs = displacements(out_counts, call.name());
  TS_MPI_CHECK(MPI_Alltoallv(bytes_of(call.in), in_counts.data(), in_displs.data(), type,
                             bytes_of(call.out), out_counts.data(), out_displs.data(), type,
                             comm_));
}

ProcessGroupPtr ProcessGroupMPI::split_group(const char* op_name, const std::vector<int>& mine,
                                             bool same_everywhere) {
  ProcessGroupPtr result;
  progress_->submit(
      [&] {
        const WatchdogScope watch(op_name, where_, default_timeout());
        if (check_) {
          // A split meets the other ranks' calls as a collective does (it moves no data here).
          Call split;
          split.kind = CollectiveKind::Split;
          if (node_ != nullptr) {
            run_on_node(split);
          } else if (size() > 1) {
            agree_over_mpi(split);
          }
        }
        const int n = size();
        // Lists travel as membership flags in the signature's counts.
        CallSignature sig;
        sig.kind = CollectiveKind::Split;
        sig.counts.assign(static_cast<size_t>(n), 0);
        for (int q : mine) sig.counts[static_cast<size_t>(q)] = 1;
        const int64_t length = encoded_signature_length(n);
        std::vector<int64_t> encoded(static_cast<size_t>(length));
        std::vector<int64_t> all(static_cast<size_t>(length * n));
        encode_signature(sig, n, encoded.data());
        TS_MPI_CHECK(MPI_Allgather(encoded.data(), static_cast<int>(length), MPI_INT64_T,
                                   all.data(), static_cast<int>(length), MPI_INT64_T, comm_));
        std::vector<CallSignature> sigs;
        std::vector<std::vector<int>> lists(static_cast<size_t>(n));
        for (int q = 0; q < n; ++q) {
          sigs.push_back(decode_signature(all.data() + q * length, n));
          const auto& flags = sigs.back().counts;
          for (size_t j = 0; j < flags.size(); ++j) {
            if (flags[j] == 1) lists[static_cast<size_t>(q)].push_back(static_cast<int>(j));
          }
        }
        check_agreement(sig, sigs, *this);
        check_split_agreement(op_name, lists, same_everywhere, *this);
        const bool member = std::binary_search(mine.begin(), mine.end(), rank());
        MPI_Comm comm = MPI_COMM_NULL;
        TS_MPI_CHECK(MPI_Comm_split(comm_, member ? mine.front() : MPI_UNDEFINED, rank(), &comm));
        if (!member) return;
        std::vector<int> members;
        for (int q : mine) members.push_back(world_ranks()[static_cast<size_t>(q)]);
        result = std::make_shared<ProcessGroupMPI>(comm, std::move(members), default_timeout(),
                                                   check_, async_threads_);
      },
      false);
  return result;
}

bool mpi_built() { return true; }

ProcessGroupPtr make_mpi_world(const InitOptions& options) {
  const bool async_threads = ensure_mpi_initialized();
  int size = 0;
  TS_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  // Ranks sharing this node share its cores (as run_threads does for its threads).
  MPI_Comm node = MPI_COMM_NULL;
  TS_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local_ranks = 1;
  TS_MPI_CHECK(MPI_Comm_size(node, &local_ranks));
  TS_MPI_CHECK(MPI_Comm_free(&node));
  // OMP_NUM_THREADS, where set, already says how many threads each process should use.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const int hardware = static_cast<int>(std::thread::hardware_concurrency());
    set_num_threads(std::max(1, hardware / local_ranks));
  }

  MPI_Comm comm = MPI_COMM_NULL;
  TS_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  std::vector<int> ranks(static_cast<size_t>(size));
  std::iota(ranks.begin(), ranks.end(), 0);
  // TESSERA_DIST_CHECK=0 or =1 overrides options.check without rebuilding the program.
  const char* env_check = std::getenv("TESSERA_DIST_CHECK");
  bool check = options.check;
  if (env_check != nullptr && std::string_view(env_check) == "0") check = false;
  if (env_check != nullptr && std::string_view(env_check) == "1") check = true;
  return std::make_shared<ProcessGroupMPI>(comm, std::move(ranks), options.timeout, check,
                                           async_threads);
}

}  // namespace tessera::dist::detail
