#include "tessera/dtensor/local_errors.h"

#include <fmt/format.h>

#include <typeinfo>

#include "tessera/dtensor/placement.h"

namespace tessera::dtensor {

namespace {

// Throws `message` as an exception of error's own type (among Tessera's), else as Error.
template <typename... Types>
[[noreturn]] void throw_as(const Error& error, const std::string& message) {
  const std::type_info& type = typeid(error);
  ((type == typeid(Types) ? throw Types(message) : void()), ...);
  throw Error(message);
}

}  // namespace

void rethrow_with_global_shapes(const Error& error, const char* op,
                                const std::vector<std::shared_ptr<const DTensorSpec>>& specs,
                                const std::vector<Placements>& ran_as,
                                const std::vector<Tensor>& locals) {
  std::string inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i] == nullptr) continue;
    const DTensorSpec& s = *specs[i];
    std::string moved;
    if (i < ran_as.size() && ran_as[i] != s.placements) {
      moved = fmt::format(", redistributed to {}", to_string(ran_as[i]));
    }
    const std::string local =
        i < locals.size() && locals[i].defined() ? fmt::format("{}", locals[i].sizes()) : "none";
    inputs +=
        fmt::format("{}input {}: global shape {} under {}{}, local shard {}",
                    inputs.empty() ? "" : "; ", i, s.shape, to_string(s.placements), moved, local);
  }
  throw_as<ShapeError, DTypeError, IndexError, DeviceError, OutOfMemoryError, NotSupportedError>(
      error, fmt::format("{} (raised on this rank's local shards, which any shapes above are; [{}] "
                         "ran on DTensors: {})",
                         error.what(), op, inputs));
}

}  // namespace tessera::dtensor
