#pragma once
// The engine's own runtime/error.h, a common folder name: with Tessera's headers reachable only
// as <tessera/...> (Note [One include root] in cmake/TesseraDeps.cmake), neither can be taken for
// the other, whichever include directory comes first.

namespace engine {
inline const char* error_header() { return "engine's runtime/error.h"; }
}  // namespace engine
