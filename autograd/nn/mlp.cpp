#include "tessera/autograd/nn/mlp.h"

#include "tessera/autograd/nn/activation.h"
#include "tessera/autograd/nn/dropout.h"
#include "tessera/autograd/nn/linear.h"

namespace tessera::nn {

MLP::MLP(const std::vector<int64_t>& sizes, MLPOptions options) : Sequential("MLP") {
  TS_CHECK(sizes.size() >= 2, "[MLP] needs at least two layer sizes (input and output), got ",
           sizes.size());
  TS_CHECK(options.dropout >= 0.0 && options.dropout <= 1.0,
           "[MLP] dropout probability has to be between 0 and 1, got ", options.dropout);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    push_back(std::make_shared<Linear>(sizes[i], sizes[i + 1], options.bias, options.tensor_options,
                                       options.generator));
    if (i + 2 == sizes.size()) break;
    if (options.activation == Activation::ReLU) {
      push_back(std::make_shared<ReLU>());
    } else {
      push_back(std::make_shared<GELU>());
    }
    if (options.dropout > 0.0) {
      push_back(std::make_shared<Dropout>(options.dropout, options.generator));
    }
  }
}

}  // namespace tessera::nn
