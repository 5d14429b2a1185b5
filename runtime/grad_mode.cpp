#include "tessera/runtime/grad_mode.h"

namespace tessera {

namespace {
// Defined here, not inline in the header, so every user of the shared library sees one variable.
thread_local bool grad_enabled = true;
}  // namespace

bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace tessera
