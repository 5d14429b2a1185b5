#pragma once
// Keys named in errors: `"a", "b" and 3 more` (the first ten).

#include <string>
#include <vector>

namespace tessera::checkpoint::detail {

std::string list_keys(const std::vector<std::string>& keys);

}  // namespace tessera::checkpoint::detail
