// The one place where autograd/ fills the runtime's recording hooks
// (see Note [Recording ops for autograd] in runtime/autograd_hooks.h).

#include "runtime/autograd_hooks.h"

namespace tessera::detail {

// Each family's formulas (autograd/formulas/<family>.cpp) install their recorder here as they are
// written; a slot left null means the family's ops are not yet differentiable.
void install_autograd_hooks(AutogradHooks& /*table*/) {}

}  // namespace tessera::detail
