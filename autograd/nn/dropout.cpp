#include "tessera/autograd/nn/dropout.h"

#include "tessera/runtime/ops.h"

namespace tessera::nn {

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  TS_CHECK(p >= 0.0 && p <= 1.0, "[Dropout] dropout probability has to be between 0 and 1, got ",
           p);
}

Tensor Dropout::forward(const Tensor& input) {
  if (!is_training() || p_ == 0.0) return input;
  return dropout(input, p_, /*train=*/true, gen_);
}

}  // namespace tessera::nn
