#pragma once
// ProcessGroup: a set of ranks that run collectives together (torch.distributed.ProcessGroup).
//
// Every member must issue the same collectives on a group in the same order, with arguments that
// agree (same dtype, matching sizes, same op and root). Collectives on different groups are
// independent: a rank may have collectives in flight on several groups at once (the row and
// column groups of a 2-D mesh). When a member fails, leaves, disagrees or times out, every member
// gets an Error instead of a hang (see Note [Collective backends] in dist.h for each backend).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/collectives/observer.h"
#include "tessera/collectives/reduce_op.h"
#include "tessera/collectives/work.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dist {

class ProcessGroup;
using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

namespace detail {
struct Call;
}

// Options of every collective: `pg->all_reduce(t, ReduceOp::Sum, {.async_op = true})`.
struct CollectiveOptions {
  bool async_op = false;
  // How long the call may wait for the other ranks; absent: the group's default_timeout().
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;
};

// Default timeout of a group's collectives (as torch.distributed's default_pg_timeout).
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(10);

// Tensors must be on the backend's device (CPU for threads and mpi), and all tensors of one call
// must share a dtype; otherwise Error naming the op. Outputs are written in place.
//
// Note [Strided tensors in collectives]
// all_gather_into_tensor, all_gather, reduce_scatter_tensor and all_to_all_single take tensors of
// any strides and read or write them in logical (row-major) element order: a view such as
// `t.view({m, n, k}).permute({1, 0, 2})` names the blocks of t along an inner dim, so DTensor
// reshards along inner dims without packing. The threads backend moves such views where they lie;
// the others stage them through contiguous buffers. The other collectives need contiguous tensors.
class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // This rank's index in the group, in [0, size()).
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }
  // The world rank of each member, by group rank.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // "threads", "mpi" or "nccl".
  virtual std::string_view backend_name() const = 0;
  // e.g. "threads group [0, 2]": used in error messages.
  std::string describe() const;

  std::chrono::milliseconds default_timeout() const { return default_timeout_; }
  void set_default_timeout(std::chrono::milliseconds timeout);

  // t = op(t of every rank), elementwise.
  WorkPtr all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum,
                     const CollectiveOptions& options = {});
  WorkPtr all_reduce(const Tensor& t, const CollectiveOptions& options);
  // out = op(in of every rank), leaving in untouched (funcol.all_reduce); same numel and dtype.
  WorkPtr all_reduce_into(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum,
                          const CollectiveOptions& options = {});
  // out (numel = size() * in.numel(), any shape) = the ranks' inputs concatenated in rank order.
  WorkPtr all_gather_into_tensor(const Tensor& out, const Tensor& in,
                                 const CollectiveOptions& options = {});
  // outs[r] = rank r's input; one output per rank, sizes may differ (outs[r].numel() must equal
  // rank r's in.numel()). Outputs may be strided views (e.g. blocks of one tensor along an inner
  // dim): backends that cannot write them directly stage through contiguous buffers.
  WorkPtr all_gather(const std::vector<Tensor>& outs, const Tensor& in,
                     const CollectiveOptions& options = {});
  // in (numel = size() * out.numel()) holds one block per rank; out = op over the ranks of block
  // rank().
  WorkPtr reduce_scatter_tensor(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum,
                                const CollectiveOptions& options = {});
  WorkPtr reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                const CollectiveOptions& options);
  // Splits `in` along dim 0 into size() blocks of in_splits[j] rows, block j going to rank j;
  // `out` receives, in rank order, out_splits[j] rows from rank j. Empty splits mean equal
  // blocks (dim 0 divisible by size()). Rows are the trailing dims and must agree.
  WorkPtr all_to_all_single(const Tensor& out, const Tensor& in,
                            const std::vector<int64_t>& out_splits = {},
                            const std::vector<int64_t>& in_splits = {},
                            const CollectiveOptions& options = {});
  // t = root's t.
  WorkPtr broadcast(const Tensor& t, int root = 0, const CollectiveOptions& options = {});
  // out = root's ins[rank()]; `ins` (one per rank, sizes may differ) is read on root only.
  WorkPtr scatter(const Tensor& out, const std::vector<Tensor>& ins, int root = 0,
                  const CollectiveOptions& options = {});
  // On root, outs[r] = rank r's in (sizes may differ); `outs` is ignored on other ranks.
  WorkPtr gather(const Tensor& in, const std::vector<Tensor>& outs, int root = 0,
                 const CollectiveOptions& options = {});
  // Point to point, matched in order per (sender, receiver) pair; sizes and dtypes must agree.
  WorkPtr send(const Tensor& t, int dst, const CollectiveOptions& options = {});
  WorkPtr recv(const Tensor& t, int src, const CollectiveOptions& options = {});
  WorkPtr barrier(const CollectiveOptions& options = {});

  // Collective over this group: each member passes the ranks (of this group, including itself)
  // of the subgroup it joins; members passing the same ranks form one new group. Lists must be
  // equal or disjoint across members (Error on every member otherwise). Rows and columns of a
  // 2-D mesh: split({0, 1}) on ranks 0 and 1 while ranks 2 and 3 call split({2, 3}).
  ProcessGroupPtr split(const std::vector<int>& ranks);
  // Collective over this group: every member passes the same ranks (of this group); returns the
  // new group on its members and nullptr on the others (torch.distributed.new_group).
  ProcessGroupPtr new_group(const std::vector<int>& ranks);

 protected:
  ProcessGroup(int rank, std::vector<int> world_ranks, std::chrono::milliseconds default_timeout);

  // The device type of the tensors this backend moves.
  virtual DeviceType device_type() const { return DeviceType::CPU; }
  // Whether run() reads and writes non-contiguous tensors itself (see Note [Strided tensors in
  // collectives]); otherwise they reach it as contiguous stand-ins.
  virtual bool moves_strided_tensors() const { return false; }
  // Runs a call whose local arguments are valid (see collectives/call.h), honouring
  // call.async_op and call.timeout. Cross-rank agreement is the backend's to check.
  virtual WorkPtr run(detail::Call&& call) = 0;
  // split / new_group after local checks: `mine` is this rank's sorted list. The backend
  // exchanges every member's list, checks them with detail::check_split_agreement and returns
  // the group this rank joins, or nullptr when `mine` does not contain rank().
  virtual ProcessGroupPtr split_group(const char* op_name, const std::vector<int>& mine,
                                      bool same_everywhere) = 0;

 private:
  WorkPtr issue(detail::Call&& call, const CollectiveOptions& options);

  int rank_;
  std::vector<int> world_ranks_;
  std::chrono::milliseconds default_timeout_;
};

}  // namespace tessera::dist
