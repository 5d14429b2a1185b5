#pragma once
// tessera::optim: optimizers (see autograd/nn/README.md).

#include "autograd/optim/adamw.h"
#include "autograd/optim/optimizer.h"
#include "autograd/optim/sgd.h"
