#include "tessera/runtime/generator.h"

namespace tessera {

// Each rank of the threads backend is a thread: one default stream per thread keeps ranks from
// sharing (and racing on) an offset, as DESIGN.md requires of per-rank state.
Generator& default_generator() {
  thread_local Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace tessera
