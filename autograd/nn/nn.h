#pragma once
// tessera::nn: modules (see autograd/nn/README.md).

#include "tessera/autograd/nn/activation.h"
#include "tessera/autograd/nn/dropout.h"
#include "tessera/autograd/nn/embedding.h"
#include "tessera/autograd/nn/linear.h"
#include "tessera/autograd/nn/mlp.h"
#include "tessera/autograd/nn/module.h"
#include "tessera/autograd/nn/normalization.h"
#include "tessera/autograd/nn/sequential.h"
