#pragma once
// The Module extension keys under which the composable parallel APIs keep their per-module state
// (nn::Module::extension): one place, so that each can refuse a module the other manages.

namespace tessera::detail {

inline constexpr const char* kFullyShardKey = "tessera.fully_shard";
inline constexpr const char* kReplicateKey = "tessera.replicate";

}  // namespace tessera::detail
