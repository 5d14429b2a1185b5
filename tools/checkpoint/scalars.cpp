#include "tools/checkpoint/scalars.h"

#include <fmt/format.h>

namespace tessera::checkpoint_tool {

const char* scalar_type(const checkpoint::Scalar& value) {
  if (std::holds_alternative<int64_t>(value)) return "int64";
  if (std::holds_alternative<double>(value)) return "double";
  return "string";
}

std::string scalar_text(const checkpoint::Scalar& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return fmt::format("{}", *i);
  // fmt's default for a double is the shortest round-trip representation.
  if (const auto* d = std::get_if<double>(&value)) return fmt::format("{}", *d);
  return std::get<std::string>(value);
}

}  // namespace tessera::checkpoint_tool
