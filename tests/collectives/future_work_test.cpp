// The Work of an async collective on a CPU backend (FutureWork): what wait() rethrows.

#include <catch2/catch.hpp>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <typeinfo>

#include "tessera/collectives/progress_thread.h"
#include "tessera/runtime/error.h"

using tessera::dist::detail::FutureWork;

namespace {

std::exception_ptr error_of_wait(FutureWork& work) {
  try {
    work.wait();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

template <typename E>
void check_rethrown_as_own_copy(const E& original) {
  FutureWork work;
  const std::exception_ptr stored = std::make_exception_ptr(original);
  work.finish(stored);
  const std::exception_ptr first = error_of_wait(work);
  const std::exception_ptr second = error_of_wait(work);
  REQUIRE(first);
  REQUIRE(second);
  // Each waiter gets its own object: none is shared with the thread that stored the error.
  CHECK(first != stored);
  CHECK(second != stored);
  CHECK(first != second);
  for (const std::exception_ptr& error : {first, second}) {
    try {
      std::rethrow_exception(error);
    } catch (const E& e) {
      CHECK(typeid(e) == typeid(original));
      CHECK(std::string(e.what()) == original.what());
    }
  }
}

template <typename E>
void check_rethrown_as_is(const E& original) {
  FutureWork work;
  const std::exception_ptr stored = std::make_exception_ptr(original);
  work.finish(stored);
  CHECK(error_of_wait(work) == stored);
  CHECK_THROWS_AS(work.wait(), E);
}

}  // namespace

TEST_CASE("a failed async collective's wait throws a copy of its error, type and message kept",
          "[collectives][work]") {
  check_rethrown_as_own_copy(tessera::CommError("[all_reduce] rank 2 failed: gone"));
  check_rethrown_as_own_copy(tessera::ShapeError("[all_gather] shapes differ"));
  check_rethrown_as_own_copy(tessera::NotSupportedError("[reduce_scatter] avg on int64"));
  check_rethrown_as_own_copy(tessera::Error("[barrier] plain"));
  check_rethrown_as_own_copy(std::out_of_range("index"));
  check_rethrown_as_own_copy(std::runtime_error("user code"));
}

TEST_CASE("a failed async collective's wait rethrows an error of another type as it is",
          "[collectives][work]") {
  struct Unusual {
    int code;
  };
  check_rethrown_as_is(Unusual{7});
  // Subclasses of the copied types keep their type and their data: nothing is sliced off.
  struct CallersCommError : tessera::CommError {
    using tessera::CommError::CommError;
    int peer = 3;
  };
  check_rethrown_as_is(CallersCommError("[all_reduce] peer 3 left"));
  check_rethrown_as_is(std::system_error(std::make_error_code(std::errc::broken_pipe), "send"));
  check_rethrown_as_is(std::bad_alloc());
}

TEST_CASE("a finished async collective's wait returns, again and again", "[collectives][work]") {
  FutureWork work;
  CHECK_FALSE(work.is_completed());
  work.finish(nullptr);
  CHECK(work.is_completed());
  CHECK_NOTHROW(work.wait());
  CHECK_NOTHROW(work.wait());
}
