#pragma once
// Umbrella header: everything users of Tessera need (API.md).

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/generator.h"
#include "runtime/ops.h"
#include "runtime/parallel.h"
#include "runtime/allocator.h"
#include "runtime/scalar.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"
#include "runtime/tensor_options.h"
#include "collectives/dist.h"
#include "collectives/observer.h"
#include "collectives/process_group.h"
#include "collectives/reduce_op.h"
#include "collectives/work.h"
