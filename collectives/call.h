#pragma once
// Internal: a collective as backends receive it, and the cross-rank agreement checks that every
// backend runs on the members' call signatures (so that all members raise the same Error).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/collectives/observer.h"
#include "tessera/collectives/process_group.h"

namespace tessera::dist::detail {

// Note [Who issues a collective]
// Element counts and dtypes can agree while the members move different data: a DTensor that is
// Shard(1) on one rank and Shard(0) on the others (a from_local of inconsistent placements) is
// gathered by same-sized all_gathers that mix rows with columns. So a layer above may say, for the
// collectives a thread issues within a scope, what they are for: a hash of everything the members
// must agree on (the redistribute's global shape, dtype, mesh and placements) and a description.
// The hash is part of each call's signature, checked like the element counts on every backend
// (and hashed into the fingerprint); the description is formatted only for the Error. A call
// issued outside any scope has hash 0, which a call inside one does not match.
struct CallContext {
  uint64_t hash = 0;
  std::shared_ptr<const std::string> description;  // shared: peers' Errors may read it
};

// A context whose hash is a stable hash of `key` (the same in every process; never 0).
CallContext make_call_context(std::string_view key, std::string description);

// The context of the collectives the calling thread issues, or nullptr.
const CallContext* current_call_context();

// Sets the calling thread's context for its lifetime (nested scopes: the innermost wins).
class CallContextScope {
 public:
  explicit CallContextScope(const CallContext& context);
  ~CallContextScope();
  CallContextScope(const CallContextScope&) = delete;
  CallContextScope& operator=(const CallContextScope&) = delete;

 private:
  const CallContext* previous_;
};

// Which fields a kind uses:
// - all_reduce, broadcast: in == out == the tensor; send: in; recv: out; barrier: none.
// - all_gather_into_tensor, reduce_scatter_tensor: in, out.
// - all_gather: in, list = outputs. gather: in, list = outputs (root only).
// - scatter: out, list = inputs (root only).
// - all_to_all_single: in, out, in_counts / out_counts (elements to / from each rank).
struct Call {
  CollectiveKind kind = CollectiveKind::Barrier;
  Tensor in;
  Tensor out;
  std::vector<Tensor> list;
  ReduceOp op = ReduceOp::Sum;
  int peer = 0;  // root (broadcast, scatter, gather), dst (send) or src (recv), as a group rank
  std::vector<int64_t> in_counts;
  std::vector<int64_t> out_counts;
  // all_to_all_single called without splits: equal blocks on every rank. With explicit splits
  // the counts may happen to be equal on some ranks only, so backends must not pick a different
  // algorithm from the counts alone.
  bool equal_splits = false;
  std::chrono::milliseconds timeout{0};
  bool async_op = false;
  CallContext context;  // taken from the issuing thread's scope (Note [Who issues a collective])

  const char* name() const { return collective_name(kind).data(); }
  DType dtype() const;
};

// What members must agree on. `counts` holds per-rank element counts: the outputs' numels for
// all_gather and gather (root), the inputs' numels for scatter (root), in_counts then out_counts
// for all_to_all_single; empty otherwise.
struct CallSignature {
  CollectiveKind kind = CollectiveKind::Barrier;
  DType dtype = kUInt8;
  ReduceOp op = ReduceOp::Sum;
  int peer = 0;
  int64_t in_numel = 0;
  int64_t out_numel = 0;
  std::vector<int64_t> counts;
  // The call's context (Note [Who issues a collective]): the hash, and the description borrowed
  // from the Call, which owns it (not encoded: decoded signatures have none). Borrowed, so that
  // members copying each other's signatures on every collective do not share a reference count.
  uint64_t context_hash = 0;
  const std::string* context_description = nullptr;
};

CallSignature signature_of(const Call& call);

// Fixed-length encoding (for exchanging signatures as int64 arrays over MPI).
int64_t encoded_signature_length(int group_size);
void encode_signature(const CallSignature& sig, int group_size, int64_t* dst);
CallSignature decode_signature(const int64_t* src, int group_size);

// Note [Agreement fingerprints]
// A backend whose ranks cannot read each other's signatures for free (mpi) checks agreement in
// two steps: each member exchanges a 24-byte fingerprint of its signature, and only when the
// fingerprints differ does it exchange whole signatures for check_agreement's detailed Error.
// `key` hashes what check_agreement requires to be equal on every member (the kind, and as the
// kind needs them the dtype, reduce op, root and element count, and the context hash of Note
// [Who issues a collective]); members agree on it when the
// maximum of the keys equals the minimum (the maximum of ~key is ~minimum). The counts that
// differ legitimately from rank to rank (all_gather's and all_to_all_single's per-rank counts,
// scatter's and gather's list on the root) are checked as a balance instead: each member adds
// w(i, j) * count for every count it sends from i to j and subtracts it for every count it
// expects, with odd pseudo-random weights w, so the balances sum to zero (mod 2^64) when every
// sender and receiver agree; a single wrong count can never cancel (an odd weight times a
// non-zero count below 2^63 is non-zero mod 2^64), several only by a 64-bit coincidence.
// Combining is max, max, wrapping sum. Every member exchanges its fingerprint the same way
// whatever its call, before any data moves (on one machine in its shared-memory tag at the first
// barrier, otherwise one MPI_Allreduce), so a barrier facing an all_reduce is told apart instead
// of hanging. No sequence number is hashed: the n-th exchange of a member always meets the n-th
// of the others.
struct Fingerprint {
  uint64_t max_key = 0;
  uint64_t max_not_key = 0;  // max of ~key
  uint64_t balance = 0;

  // Folds in another member's fingerprint (or a combination of several).
  void combine(const Fingerprint& other);
  bool agrees() const { return max_key == ~max_not_key && balance == 0; }
};

// Member `rank`'s fingerprint of `sig` in a group of `group_size`; see Note [Agreement
// fingerprints]. The members' signatures pass check_agreement exactly when their fingerprints
// combine to one that agrees (barring a 64-bit coincidence); the two must change together.
Fingerprint fingerprint_of(const CallSignature& sig, int rank, int group_size);

// Throws (on every rank alike, given the same signatures) an Error naming `mine`'s op, the group,
// the disagreeing ranks and their values. sigs[r] is member r's signature.
void check_agreement(const CallSignature& mine, const std::vector<CallSignature>& sigs,
                     const ProcessGroup& group);
// Send/recv pair: throws on both sides alike when sizes or dtypes differ. src and dst are group
// ranks; world_ranks names them in the message.
void check_p2p_agreement(const char* op_name, const CallSignature& send, const CallSignature& recv,
                         int src, int dst, const std::string& where,
                         const std::vector<int>& world_ranks);
// lists[r]: member r's sorted list. Every list must contain its member; with same_everywhere
// all lists are equal, otherwise any two are equal or disjoint.
void check_split_agreement(const char* op_name, const std::vector<std::vector<int>>& lists,
                           bool same_everywhere, const ProcessGroup& group);

// Contiguous bytes of `t` (CPU).
inline char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

}  // namespace tessera::dist::detail
