#pragma once
// Shared checks of the tests of ops on DTensors: inputs of small integers (exact in float64) and
// failure strings for on_mesh bodies (Catch2 assertions are not thread-safe in rank threads).

#include <functional>
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

// Records a failure unless fn raises a tessera::Error whose message has every needle.
inline void expect_error(Failures& f, const std::string& what, const std::function<void()>& fn,
                         const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& needle : needles) {
      if (msg.find(needle) == std::string::npos) {
        f.push_back(what + ": message lacks \"" + needle + "\": " + msg);
      }
    }
    return;
  } catch (const std::exception& e) {
    f.push_back(what + ": not a tessera::Error: " + e.what());
    return;
  }
  f.push_back(what + ": no Error");
}

}  // namespace tessera::dtensor_test
