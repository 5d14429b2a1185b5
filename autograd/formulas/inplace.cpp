#include "tessera/autograd/formulas/inplace.h"

#include "tessera/autograd/autograd_meta.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera::autograd {

void check_inplace(const Tensor& self, const char* op) {
  if (!is_grad_enabled()) return;
  const AutogradMeta* meta = get_autograd_meta(self);
  if (meta == nullptr) return;
  TS_CHECK(!meta->is_view_ || !meta->requires_grad(), "[", op,
           "] in-place write into a view of a tensor that requires grad (shape ", self.sizes(),
           "): write into the base, or into a clone of the view, or run it under NoGradGuard");
  TS_CHECK(!meta->requires_grad_ || meta->grad_fn_ != nullptr, "[", op,
           "] a leaf tensor that requires grad (shape ", self.sizes(),
           ") is being used in an in-place operation; update it under NoGradGuard (as optimizers "
           "do), or write into a clone");
}

Tensor& record_inplace(Tensor& self, const char* op,
                       const std::function<Tensor(const Tensor&)>& compute) {
  check_inplace(self, op);
  const Tensor result = compute(self.clone());
  TS_CHECK_SHAPE(result.sizes() == self.sizes(), "[", op, "] output with shape ", self.sizes(),
                 " doesn't match the broadcast shape ", result.sizes());
  {
    NoGradGuard no_grad;
    self.copy_(result);
  }
  const AutogradMeta* from = get_autograd_meta(result);
  if (from == nullptr || from->grad_fn_ == nullptr) return self;
  AutogradMeta& meta = materialize_autograd_meta(self);
  meta.grad_fn_ = from->grad_fn_;
  meta.output_nr_ = from->output_nr_;
  return self;
}

}  // namespace tessera::autograd
