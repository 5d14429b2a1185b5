#include "tessera/dtensor/metadata_agreement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tessera/collectives/call.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/ops.h"

namespace tessera::dtensor {

namespace {

constexpr size_t kMaxDims = 8;
// Per entry: dtype, ndim, the global dims, the local dims (padded with -1).
constexpr size_t kEntryWords = 2 + 2 * kMaxDims;

void encode(const TensorMetadata& e, std::vector<int64_t>& out) {
  out.push_back(static_cast<int64_t>(e.dtype));
  out.push_back(static_cast<int64_t>(e.global_shape.size()));
  for (const Shape* shape : {&e.global_shape, &e.local_shape}) {
    for (size_t i = 0; i < kMaxDims; ++i) out.push_back(i < shape->size() ? (*shape)[i] : -1);
  }
}

TensorMetadata decode(const int64_t* words, const std::string& name) {
  const auto ndim = static_cast<size_t>(std::clamp<int64_t>(words[1], 0, kMaxDims));
  TensorMetadata e{name, static_cast<DType>(words[0]), {}, {}};
  e.global_shape.assign(words + 2, words + 2 + ndim);
  e.local_shape.assign(words + 2 + kMaxDims, words + 2 + kMaxDims + ndim);
  return e;
}

// The global rank of the member `group_rank` of this rank's group along `mesh_dim`.
int global_rank_of(const DeviceMesh& mesh, int64_t mesh_dim, int group_rank) {
  std::vector<int64_t> coord = *mesh.get_coordinate();
  coord[static_cast<size_t>(mesh_dim)] = group_rank;
  int64_t linear = 0;
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    linear = linear * mesh.size(m) + coord[static_cast<size_t>(m)];
  }
  return mesh.ranks()[static_cast<size_t>(linear)];
}

std::string describe(const TensorMetadata& e) {
  return fmt::format("a {} local tensor of shape {} (global shape {})", dtype_name(e.dtype),
                     e.local_shape, e.global_shape);
}

}  // namespace

void check_metadata_agreement(const char* op, const std::vector<TensorMetadata>& entries,
                              const DeviceMesh& mesh, const std::string& advice) {
  std::vector<int64_t> mine;
  mine.reserve(entries.size() * kEntryWords);
  for (const TensorMetadata& e : entries) {
    TS_CHECK(e.global_shape.size() <= kMaxDims && e.local_shape.size() == e.global_shape.size(),
             "[", op, "] ", e.name, ": checking that ranks agree supports tensors of up to ",
             kMaxDims, " dims, got ", e.local_shape.size());
    encode(e, mine);
  }
  if (mine.empty()) return;
  const dist::detail::CallContext context = dist::detail::make_call_context(
      fmt::format("metadata_agreement|{}|{}", op, entries.size()),
      fmt::format("{}'s check that ranks agree on {} tensor(s)", op, entries.size()));
  const dist::detail::CallContextScope scope(context);
  const Tensor in = from_vector(mine, {static_cast<int64_t>(mine.size())});
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    const dist::ProcessGroupPtr group = mesh.get_group(m);
    const Tensor all = Tensor::make_empty({group->size(), static_cast<int64_t>(mine.size())},
                                          kInt64, Device::cpu());
    group->all_gather_into_tensor(all, in)->wait();
    const std::vector<int64_t> words = all.to_vector<int64_t>();
    for (int r = 0; r < group->size(); ++r) {
      const int64_t* theirs = words.data() + static_cast<size_t>(r) * mine.size();
      for (size_t i = 0; i < entries.size(); ++i) {
        const int64_t* a = mine.data() + i * kEntryWords;
        if (std::equal(a, a + kEntryWords, theirs + i * kEntryWords)) continue;
        TS_CHECK(false, "[", op, "] ranks disagree on ", entries[i].name, ": this rank (rank ",
                 global_rank_of(mesh, m, group->rank()), ") has ", describe(entries[i]),
                 " but rank ", global_rank_of(mesh, m, r), " has ",
                 describe(decode(theirs + i * kEntryWords, entries[i].name)), "; ", advice);
      }
    }
  }
}

}  // namespace tessera::dtensor
