#include "tessera/checkpoint/detail/key_list.h"

#include <algorithm>

namespace tessera::checkpoint::detail {

std::string list_keys(const std::vector<std::string>& keys) {
  std::string out;
  const size_t shown = std::min<size_t>(keys.size(), 10);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    out += "\"" + keys[i] + "\"";
  }
  if (keys.size() > shown) out += " and " + std::to_string(keys.size() - shown) + " more";
  return out;
}

}  // namespace tessera::checkpoint::detail
