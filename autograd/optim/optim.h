#pragma once
// tessera::optim: optimizers (see autograd/nn/README.md).

#include "tessera/autograd/optim/adamw.h"
#include "tessera/autograd/optim/lr_scheduler.h"
#include "tessera/autograd/optim/optimizer.h"
#include "tessera/autograd/optim/sgd.h"
