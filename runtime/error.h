#pragma once
// Tessera's exceptions and the checks that raise them.
//
// Every user-facing failure is a tessera::Error whose message starts with the op's name in
// brackets, e.g. "[matmul] inner dimensions must match, got [2, 3] and [4, 5]". Subclasses exist
// where a caller can act on the type.

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ShapeError : public Error {
  using Error::Error;
};
class DTypeError : public Error {
  using Error::Error;
};
class IndexError : public Error {
  using Error::Error;
};
class DeviceError : public Error {
  using Error::Error;
};
class OutOfMemoryError : public Error {
  using Error::Error;
};
class CommError : public Error {
  using Error::Error;
};
class NotSupportedError : public Error {
  using Error::Error;
};

namespace detail {

template <typename... Args>
std::string concat_message(const Args&... args) {
  std::ostringstream os;
  ((os << args), ...);
  return os.str();
}

[[noreturn]] void throw_internal_assert(const char* cond, const char* file, int line,
                                        const std::string& msg);

}  // namespace detail
}  // namespace tessera

// Caller mistakes: the message (any streamable pieces) is built only when the check fails.
#define TS_CHECK_T(ErrorType, cond, ...)                               \
  do {                                                                 \
    if (!(cond)) [[unlikely]] {                                        \
      throw ErrorType(::tessera::detail::concat_message(__VA_ARGS__)); \
    }                                                                  \
  } while (0)
#define TS_CHECK(cond, ...) TS_CHECK_T(::tessera::Error, cond, __VA_ARGS__)
#define TS_CHECK_SHAPE(cond, ...) TS_CHECK_T(::tessera::ShapeError, cond, __VA_ARGS__)
#define TS_CHECK_DTYPE(cond, ...) TS_CHECK_T(::tessera::DTypeError, cond, __VA_ARGS__)
#define TS_CHECK_INDEX(cond, ...) TS_CHECK_T(::tessera::IndexError, cond, __VA_ARGS__)

// Our own bugs: never a user's fault.
#define TS_INTERNAL_ASSERT(cond, ...)                                                           \
  do {                                                                                          \
    if (!(cond)) [[unlikely]] {                                                                 \
      ::tessera::detail::throw_internal_assert(#cond, __FILE__, __LINE__,                       \
                                               ::tessera::detail::concat_message(__VA_ARGS__)); \
    }                                                                                           \
  } while (0)
