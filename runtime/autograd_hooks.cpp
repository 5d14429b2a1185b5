#include "runtime/autograd_hooks.h"

namespace tessera {

const AutogradHooks& autograd_hooks() {
  static const AutogradHooks table = [] {
    AutogradHooks t;
    detail::install_autograd_hooks(t);
    return t;
  }();
  return table;
}

}  // namespace tessera
