#include "tessera/collectives/call.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <ostream>

namespace tessera::dist::detail {

namespace {

constexpr int64_t kHeaderLength = 7;

// Member r of a group by its world rank, with its group rank beside it where they differ
// ("rank 5 (group rank 1)"), so a message never mixes the two unsaid.
std::string rank_name(const std::vector<int>& world_ranks, size_t r) {
  const int world = r < world_ranks.size() ? world_ranks[r] : static_cast<int>(r);
  if (world == static_cast<int>(r)) return fmt::format("rank {}", r);
  return fmt::format("rank {} (group rank {})", world, r);
}

// "rank 0: 4, rank 1: 5" for every member's value.
template <typename F>
std::string per_rank(const std::vector<int>& world_ranks, size_t n, F&& value) {
  std::string s;
  for (size_t r = 0; r < n; ++r) {
    s += fmt::format("{}{}: {}", r ? ", " : "", rank_name(world_ranks, r), value(r));
  }
  return s;
}

// The group's description, formatted only when a message is built: checks run on every call.
struct GroupName {
  const ProcessGroup& group;
};
std::ostream& operator<<(std::ostream& os, const GroupName& name) {
  return os << name.group.describe();
}

template <typename T, typename F>
bool all_equal(const std::vector<CallSignature>& sigs, F&& field) {
  const T first = field(sigs[0]);
  return std::all_of(sigs.begin(), sigs.end(), [&](const auto& s) { return field(s) == first; });
}

std::vector<int64_t> numels(const std::vector<Tensor>& ts) {
  std::vector<int64_t> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(t.numel());
  return out;
}

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_fields(std::initializer_list<int64_t> fields) {
  uint64_t h = 0;
  for (int64_t f : fields) h = mix(h ^ static_cast<uint64_t>(f));
  return h;
}

// The weight of elements going from rank i to rank j in a balance (odd: see Note [Agreement
// fingerprints]).
uint64_t weight(size_t i, size_t j) { return mix((uint64_t{i} << 32) ^ uint64_t{j}) | 1; }

thread_local const CallContext* current_context = nullptr;

// "redistribute ... (rank 0), ... (ranks 1, 2)": each distinct context once, with its members.
std::string describe_contexts(const std::vector<CallSignature>& sigs,
                              const std::vector<int>& world_ranks) {
  std::vector<size_t> firsts;  // the first member of each distinct hash
  for (size_t r = 0; r < sigs.size(); ++r) {
    const bool seen = std::any_of(firsts.begin(), firsts.end(), [&](size_t f) {
      return sigs[f].context_hash == sigs[r].context_hash;
    });
    if (!seen) firsts.push_back(r);
  }
  std::string s;
  for (size_t f : firsts) {
    std::vector<size_t> members;
    for (size_t r = 0; r < sigs.size(); ++r) {
      if (sigs[r].context_hash == sigs[f].context_hash) {
        members.push_back(r < world_ranks.size() ? static_cast<size_t>(world_ranks[r]) : r);
      }
    }
    const CallSignature& c = sigs[f];
    const std::string what =
        c.context_hash == 0                ? std::string("a collective outside any DTensor op")
        : c.context_description != nullptr ? *c.context_description
                                           : fmt::format("context {:#018x}", c.context_hash);
    s += fmt::format("{}{} (rank{} {})", s.empty() ? "" : "; ", what, members.size() > 1 ? "s" : "",
                     fmt::join(members, ", "));
  }
  return s;
}

}  // namespace

CallContext make_call_context(std::string_view key, std::string description) {
  // FNV-1a: the same value in every process that runs this code, unlike std::hash.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : key) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return {std::max<uint64_t>(h, 1), std::make_shared<const std::string>(std::move(description))};
}

const CallContext* current_call_context() { return current_context; }

CallContextScope::CallContextScope(const CallContext& context) : previous_(current_context) {
  current_context = &context;
}

CallContextScope::~CallContextScope() { current_context = previous_; }

DType Call::dtype() const {
  if (in.defined()) return in.dtype();
  if (out.defined()) return out.dtype();
  return list.empty() ? kUInt8 : list.front().dtype();
}

CallSignature signature_of(const Call& call) {
  CallSignature sig;
  sig.kind = call.kind;
  sig.dtype = call.dtype();
  sig.op = call.op;
  sig.peer = call.peer;
  sig.in_numel = call.in.defined() ? call.in.numel() : 0;
  sig.out_numel = call.out.defined() ? call.out.numel() : 0;
  sig.context_hash = call.context.hash;
  sig.context_description = call.context.description.get();
  switch (call.kind) {
    case CollectiveKind::AllGather:
    case CollectiveKind::Gather:
    case CollectiveKind::Scatter:
      sig.counts = numels(call.list);
      break;
    case CollectiveKind::AllToAllSingle:
      sig.counts = call.in_counts;
      sig.counts.insert(sig.counts.end(), call.out_counts.begin(), call.out_counts.end());
      break;
    default:
      break;
  }
  return sig;
}

int64_t encoded_signature_length(int group_size) { return kHeaderLength + 2 * group_size; }

void encode_signature(const CallSignature& sig, int group_size, int64_t* dst) {
  std::fill(dst, dst + encoded_signature_length(group_size), -1);
  dst[0] = static_cast<int64_t>(sig.kind);
  dst[1] = static_cast<int64_t>(sig.dtype);
  dst[2] = static_cast<int64_t>(sig.op);
  dst[3] = sig.peer;
  dst[4] = sig.in_numel;
  dst[5] = sig.out_numel;
  dst[6] = static_cast<int64_t>(sig.context_hash);
  TS_INTERNAL_ASSERT(sig.counts.size() <= static_cast<size_t>(2 * group_size));
  std::copy(sig.counts.begin(), sig.counts.end(), dst + kHeaderLength);
}

CallSignature decode_signature(const int64_t* src, int group_size) {
  CallSignature sig;
  sig.kind = static_cast<CollectiveKind>(src[0]);
  sig.dtype = static_cast<DType>(src[1]);
  sig.op = static_cast<ReduceOp>(src[2]);
  sig.peer = static_cast<int>(src[3]);
  sig.in_numel = src[4];
  sig.out_numel = src[5];
  sig.context_hash = static_cast<uint64_t>(src[6]);
  const int64_t* counts = src + kHeaderLength;
  const int64_t* end = counts + 2 * group_size;
  sig.counts.assign(counts, std::find(counts, end, int64_t{-1}));
  return sig;
}

void Fingerprint::combine(const Fingerprint& other) {
  max_key = std::max(max_key, other.max_key);
  max_not_key = std::max(max_not_key, other.max_not_key);
  balance += other.balance;  // unsigned: wraps
}

Fingerprint fingerprint_of(const CallSignature& sig, int rank, int group_size) {
  const auto kind = static_cast<int64_t>(sig.kind);
  const auto dtype = static_cast<int64_t>(sig.dtype);
  const auto r = static_cast<size_t>(rank);
  const auto n = static_cast<size_t>(group_size);
  const auto p = static_cast<size_t>(sig.peer);
  const auto count = [](int64_t c) { return static_cast<uint64_t>(c); };
  uint64_t key = 0;
  uint64_t balance = 0;
  // Mirrors check_agreement, kind by kind.
  switch (sig.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatterTensor:
      key = hash_fields({kind, dtype, static_cast<int64_t>(sig.op), sig.in_numel});
      break;
    case CollectiveKind::AllGatherIntoTensor:
      key = hash_fields({kind, dtype, sig.in_numel});
      break;
    case CollectiveKind::Broadcast:
      key = hash_fields({kind, dtype, sig.peer, sig.in_numel});
      break;
    case CollectiveKind::Scatter:
      key = hash_fields({kind, dtype, sig.peer});
      balance -= weight(p, r) * count(sig.out_numel);
      if (r == p) {
        for (size_t j = 0; j < sig.counts.size(); ++j) {
          balance += weight(p, j) * count(sig.counts[j]);
        }
      }
      break;
    case CollectiveKind::Gather:
      key = hash_fields({kind, dtype, sig.peer});
      balance += weight(r, p) * count(sig.in_numel);
      if (r == p) {
        for (size_t j = 0; j < sig.counts.size(); ++j) {
          balance -= weight(j, p) * count(sig.counts[j]);
        }
      }
      break;
    case CollectiveKind::AllGather:
      key = hash_fields({kind, dtype});
      for (size_t q = 0; q < n; ++q) balance += weight(r, q) * count(sig.in_numel);
      for (size_t q = 0; q < sig.counts.size(); ++q) balance -= weight(q, r) * count(sig.counts[q]);
      break;
    case CollectiveKind::AllToAllSingle:
      key = hash_fields({kind, dtype});
      // counts: n in_counts (to each rank), then n out_counts (from each rank).
      for (size_t j = 0; j < n && j < sig.counts.size(); ++j) {
        balance += weight(r, j) * count(sig.counts[j]);
      }
      for (size_t j = 0; n + j < sig.counts.size(); ++j) {
        balance -= weight(j, r) * count(sig.counts[n + j]);
      }
      break;
    default:  // barrier, split: the kind alone
      return {hash_fields({kind}), ~hash_fields({kind}), balance};
  }
  key = mix(key ^ sig.context_hash);
  return {key, ~key, balance};
}

void check_agreement(const CallSignature& mine, const std::vector<CallSignature>& sigs,
                     const ProcessGroup& group) {
  const char* op = collective_name(mine.kind).data();
  const size_t n = sigs.size();
  const GroupName where{group};
  const std::vector<int>& ranks = group.world_ranks();
  const auto name = [&](size_t r) { return rank_name(ranks, r); };
  TS_CHECK(all_equal<CollectiveKind>(sigs, [](const auto& s) { return s.kind; }), "[", op,
           "] the members of ", where, " issued different collectives: ",
           per_rank(ranks, n, [&](size_t r) { return collective_name(sigs[r].kind); }));
  if (mine.kind == CollectiveKind::Barrier || mine.kind == CollectiveKind::Split) return;
  TS_CHECK(all_equal<uint64_t>(sigs, [](const auto& s) { return s.context_hash; }), "[", op,
           "] the members of ", where,
           " issued it for different operations, so their data would not match: ",
           describe_contexts(sigs, ranks),
           ". Every rank must run the same DTensor operations on the same global shapes and "
           "placements (check the placements given to from_local on each rank)");
  TS_CHECK_DTYPE(all_equal<DType>(sigs, [](const auto& s) { return s.dtype; }), "[", op,
                 "] the members of ", where, " disagree on the dtype: ",
                 per_rank(ranks, n, [&](size_t r) { return dtype_name(sigs[r].dtype); }));
  const auto numel_check = [&](auto field, const char* what) {
    TS_CHECK_SHAPE(all_equal<int64_t>(sigs, field), "[", op, "] the members of ", where,
                   " disagree on the number of elements of ", what, ": ",
                   per_rank(ranks, n, [&](size_t r) { return field(sigs[r]); }));
  };
  const auto in_numel = [](const CallSignature& s) { return s.in_numel; };
  switch (mine.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatterTensor: {
      TS_CHECK(all_equal<ReduceOp>(sigs, [](const auto& s) { return s.op; }), "[", op,
               "] the members of ", where, " disagree on the reduce op: ",
               per_rank(ranks, n, [&](size_t r) { return reduce_op_name(sigs[r].op); }));
      numel_check(in_numel, "the input");
      break;
    }
    case CollectiveKind::AllGatherIntoTensor:
      numel_check(in_numel, "the input");
      break;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Scatter:
    case CollectiveKind::Gather: {
      TS_CHECK(all_equal<int>(sigs, [](const auto& s) { return s.peer; }), "[", op,
               "] the members of ", where, " disagree on the root: ",
               per_rank(ranks, n, [&](size_t r) { return sigs[r].peer; }));
      const CallSignature& root = sigs[static_cast<size_t>(mine.peer)];
      if (mine.kind == CollectiveKind::Broadcast) {
        numel_check(in_numel, "the tensor");
      } else if (mine.kind == CollectiveKind::Scatter) {
        for (size_t r = 0; r < n; ++r) {
          TS_CHECK_SHAPE(root.counts[r] == sigs[r].out_numel, "[", op, "] root ",
                         name(static_cast<size_t>(mine.peer)), " of ", where, " sends ",
                         root.counts[r], " elements to ", name(r), " (ins[", r, "]) but ", name(r),
                         " receives ", sigs[r].out_numel);
        }
      } else {
        for (size_t r = 0; r < n; ++r) {
          TS_CHECK_SHAPE(root.counts[r] == sigs[r].in_numel, "[", op, "] ", name(r), " of ", where,
                         " sends ", sigs[r].in_numel, " elements but root ",
                         name(static_cast<size_t>(mine.peer)), " expects ", root.counts[r],
                         " (outs[", r, "])");
        }
      }
      break;
    }
    case CollectiveKind::AllGather:
      for (size_t q = 0; q < n; ++q) {
        for (size_t r = 0; r < n; ++r) {
          TS_CHECK_SHAPE(sigs[q].counts[r] == sigs[r].in_numel, "[", op, "] ", name(r), " of ",
                         where, " sends ", sigs[r].in_numel, " elements but ", name(q), " expects ",
                         sigs[q].counts[r], " from it (outs[", r, "])");
        }
      }
      break;
    case CollectiveKind::AllToAllSingle:
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const int64_t sent = sigs[i].counts[j];
          const int64_t expected = sigs[j].counts[n + i];
          TS_CHECK_SHAPE(sent == expected, "[", op, "] ", name(i), " of ", where, " sends ", sent,
                         " elements to ", name(j), " but ", name(j), " expects ", expected,
                         " from ", name(i), " (compare in_splits on ", name(i),
                         " with out_splits on ", name(j), ")");
        }
      }
      break;
    default:
      TS_INTERNAL_ASSERT(false, "no agreement rule for ", op);
  }
}

void check_p2p_agreement(const char* op_name, const CallSignature& send, const CallSignature& recv,
                         int src, int dst, const std::string& where,
                         const std::vector<int>& world_ranks) {
  const std::string from = rank_name(world_ranks, static_cast<size_t>(src));
  const std::string to = rank_name(world_ranks, static_cast<size_t>(dst));
  TS_CHECK_DTYPE(send.dtype == recv.dtype, "[", op_name, "] ", from, " of ", where, " sends ",
                 dtype_name(send.dtype), " but ", to, " receives ", dtype_name(recv.dtype));
  TS_CHECK_SHAPE(send.in_numel == recv.out_numel, "[", op_name, "] ", from, " of ", where,
                 " sends ", send.in_numel, " elements but ", to, " receives ", recv.out_numel);
}

void check_split_agreement(const char* op_name, const std::vector<std::vector<int>>& lists,
                           bool same_everywhere, const ProcessGroup& group) {
  const auto show = [&](size_t r) { return fmt::format("[{}]", fmt::join(lists[r], ", ")); };
  for (size_t r = 0; r < lists.size(); ++r) {
    const bool equal = lists[r] == lists[0];
    if (same_everywhere) {
      TS_CHECK(equal, "[", op_name, "] every member of ", group.describe(),
               " must pass the same ranks, got ",
               per_rank(group.world_ranks(), lists.size(), show));
      continue;
    }
    TS_CHECK(std::binary_search(lists[r].begin(), lists[r].end(), static_cast<int>(r)), "[",
             op_name, "] ", rank_name(group.world_ranks(), r), " of ", group.describe(), " passed ",
             show(r), ", which does not contain itself; each member lists the group it joins");
    for (int q : lists[r]) {
      TS_CHECK(lists[static_cast<size_t>(q)] == lists[r], "[", op_name, "] ",
               rank_name(group.world_ranks(), r), " of ", group.describe(), " puts group rank ", q,
               " in ", show(r), " but ", rank_name(group.world_ranks(), static_cast<size_t>(q)),
               " asks for ", show(static_cast<size_t>(q)),
               "; members of one new group must pass equal lists");
    }
  }
}

}  // namespace tessera::dist::detail
