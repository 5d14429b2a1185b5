#include "tessera/runtime/error.h"

namespace tessera::detail {

void throw_internal_assert(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(concat_message("[internal] assertion `", cond, "` failed at ", file, ":", line,
                             msg.empty() ? "" : ": ", msg,
                             " (this is a Tessera bug; please report it)"));
}

}  // namespace tessera::detail
