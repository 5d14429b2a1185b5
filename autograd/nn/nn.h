#pragma once
// tessera::nn: modules (see autograd/nn/README.md).

#include "autograd/nn/activation.h"
#include "autograd/nn/dropout.h"
#include "autograd/nn/embedding.h"
#include "autograd/nn/linear.h"
#include "autograd/nn/mlp.h"
#include "autograd/nn/module.h"
#include "autograd/nn/normalization.h"
#include "autograd/nn/sequential.h"
