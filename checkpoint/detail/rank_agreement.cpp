#include "tessera/checkpoint/detail/rank_agreement.h"

#include <cstring>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/collectives/dist.h"
#include "tessera/runtime/ops.h"

namespace tessera::checkpoint::detail {

dist::ProcessGroupPtr world_or_null() { return dist::is_initialized() ? dist::world() : nullptr; }

std::vector<std::string> all_gather_strings(dist::ProcessGroup* group, const std::string& mine) {
  if (group == nullptr || group->size() == 1) return {mine};
  const int n = group->size();
  Tensor my_size = full({1}, static_cast<int64_t>(mine.size()), kInt64);
  Tensor sizes = empty({n}, kInt64);
  group->all_gather_into_tensor(sizes, my_size)->wait();
  // One byte more than the text, so that an empty string is still a tensor of one element.
  Tensor in = empty({static_cast<int64_t>(mine.size()) + 1}, kUInt8);
  std::memcpy(in.raw_data(), mine.data(), mine.size());
  std::vector<Tensor> outs;
  const int64_t* s = sizes.data_ptr<int64_t>();
  for (int r = 0; r < n; ++r) outs.push_back(empty({s[r] + 1}, kUInt8));
  group->all_gather(outs, in)->wait();
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    out.emplace_back(static_cast<const char*>(outs[r].raw_data()), static_cast<size_t>(s[r]));
  }
  return out;
}

void raise_if_any_failed(dist::ProcessGroup* group, const std::string& error,
                         std::exception_ptr mine) {
  raise_first_error(all_gather_strings(group, error), mine);
}

void raise_first_error(const std::vector<std::string>& errors, std::exception_ptr mine) {
  int first = -1, failed = 0;
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    if (first < 0) first = static_cast<int>(r);
    ++failed;
  }
  if (first < 0) return;
  if (mine) std::rethrow_exception(mine);
  if (errors.size() == 1) throw CheckpointError(errors[0]);
  throw CheckpointError("[checkpoint] rank " + std::to_string(first) +
                        (failed > 1 ? " (and " + std::to_string(failed - 1) + " more)" : "") +
                        " failed: " + errors[first]);
}

}  // namespace tessera::checkpoint::detail
