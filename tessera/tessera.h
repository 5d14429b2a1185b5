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
