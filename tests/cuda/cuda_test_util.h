#pragma once
// CUDA tests run only where a device is present; elsewhere each test case prints why it skipped
// (a WARN line in the test's output) and returns.

#include <catch2/catch.hpp>

#include "tessera/runtime/device.h"

#define TS_REQUIRE_CUDA_DEVICE()                                                          \
  do {                                                                                    \
    if (!::tessera::cuda_is_available()) {                                                \
      WARN(                                                                               \
          "skipped: no CUDA device on this machine (cuda_is_available() is false); this " \
          "test runs on a GPU machine, e.g. through tools/gpu-check.sh");                 \
      return;                                                                             \
    }                                                                                     \
  } while (0)
