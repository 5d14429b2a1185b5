#pragma once
// Shared checks of the tests of ops on DTensors: inputs of small integers (exact in float64) and
// failure strings for on_mesh bodies (Catch2 assertions are not thread-safe in rank threads).

#include <sstream>
#include <string>
#include <vector>

#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {

using Failures = std::vector<std::string>;

// The same small integers (as float64) on every rank: randint from a generator of `seed`.
inline Tensor ints(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randint(-5, 6, shape, kInt64, &gen).to(kFloat64);
}

inline void expect_placements(Failures& f, const std::string& what, const DTensor& t,
                              const Placements& expected) {
  if (t.placements() != expected) {
    f.push_back(what + ": placements " + to_string(t.placements()) + ", expected " +
                to_string(expected));
  }
}

inline void expect_equal(Failures& f, const std::string& what, const Tensor& got,
                         const Tensor& expected) {
  if (!equal(got, expected)) {
    std::ostringstream os;
    os << what << ": result differs from the single-device op\n got " << got << "\n expected "
       << expected;
    f.push_back(os.str());
  }
}

}  // namespace tessera::dtensor_test
