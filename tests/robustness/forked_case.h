#pragma once
// Runs one bad-input case in a forked child with an alarm, so that a crash, a hang or a memory
// blow-up fails that case by name instead of taking the test run down. The child reports through a
// pipe what the body did: returned, threw a tessera::Error (with its type and message), or threw
// something else. The parent never runs Tessera code itself: forking a process whose OpenMP or
// rank threads are running would hand the child locks that no thread will release.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::robustness_test {

struct Outcome {
  enum class Kind { Returned, TesseraError, OtherException, Crashed, TimedOut };
  Kind kind = Kind::Crashed;
  std::string error_type;  // the Error subclass, e.g. "ShapeError"
  std::string message;     // what(), or the signal's name
};

inline std::string describe(const Outcome& o) {
  switch (o.kind) {
    case Outcome::Kind::Returned:
      return "returned normally";
    case Outcome::Kind::TesseraError:
      return "raised " + o.error_type + ": " + o.message;
    case Outcome::Kind::OtherException:
      return "raised a non-tessera exception: " + o.message;
    case Outcome::Kind::Crashed:
      return "crashed: " + o.message;
    case Outcome::Kind::TimedOut:
      return "hung (killed by the alarm): " + o.message;
  }
  return "?";
}

// Address space for a child: a case that allocates without bound fails at this limit with an
// exception instead of taking the machine's memory. Sanitizers reserve terabytes of shadow
// memory, so their builds go without (the alarm still stops a runaway case).
#ifdef TESSERA_TEST_UNDER_SANITIZER
constexpr rlim_t kChildAddressSpace = RLIM_INFINITY;
#else
constexpr rlim_t kChildAddressSpace = rlim_t{16} << 30;
#endif

inline std::string error_type_of(const Error& e) {
  if (dynamic_cast<const ShapeError*>(&e)) return "ShapeError";
  if (dynamic_cast<const DTypeError*>(&e)) return "DTypeError";
  if (dynamic_cast<const IndexError*>(&e)) return "IndexError";
  if (dynamic_cast<const DeviceError*>(&e)) return "DeviceError";
  if (dynamic_cast<const OutOfMemoryError*>(&e)) return "OutOfMemoryError";
  if (dynamic_cast<const CommError*>(&e)) return "CommError";
  if (dynamic_cast<const NotSupportedError*>(&e)) return "NotSupportedError";
  return "Error";
}

inline void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Runs body in a child process, killed after `seconds`; `limit_memory`: under kChildAddressSpace
// (off for cases that reserve much address space by design, such as thousands of thread stacks).
inline Outcome run_forked(const std::function<void()>& body, unsigned seconds = 60,
                          bool limit_memory = true) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (limit_memory) {
      const rlimit limit{kChildAddressSpace, kChildAddressSpace};
      ::setrlimit(RLIMIT_AS, &limit);
    }
    ::alarm(seconds);
    std::string report;
    try {
      body();
      report = "R";
    } catch (const Error& e) {
      report = "E" + error_type_of(e) + '\n' + e.what();
    } catch (const std::exception& e) {
      report = std::string("O") + typeid(e).name() + ": " + e.what();
    } catch (...) {
      report = "Oan exception not derived from std::exception";
    }
    write_all(fds[1], report);
    ::close(fds[1]);
    ::_exit(0);  // no static destructors: the parent's state is not the child's to tear down
  }
  ::close(fds[1]);
  std::string report;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) {
    report.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome o;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    o.kind = sig == SIGALRM ? Outcome::Kind::TimedOut : Outcome::Kind::Crashed;
    o.message = std::string("signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
    return o;
  }
  if (report.empty()) {
    o.message =
        "the child exited with status " + std::to_string(WEXITSTATUS(status)) + " without a report";
    return o;
  }
  if (report[0] == 'R') {
    o.kind = Outcome::Kind::Returned;
  } else if (report[0] == 'E') {
    o.kind = Outcome::Kind::TesseraError;
    const size_t nl = report.find('\n');
    o.error_type = report.substr(1, nl - 1);
    o.message = report.substr(nl + 1);
  } else {
    o.kind = Outcome::Kind::OtherException;
    o.message = report.substr(1);
  }
  return o;
}

// The case must raise a tessera::Error whose message holds every one of `fragments` (the op's
// name and the bad value, typically).
inline void expect_error(const std::string& name, const std::function<void()>& body,
                         const std::vector<std::string>& fragments, unsigned seconds = 60) {
  const Outcome o = run_forked(body, seconds);
  INFO("case: " << name << " -> " << describe(o));
  CHECK(o.kind == Outcome::Kind::TesseraError);
  for (const std::string& f : fragments) {
    INFO("expected in the message: \"" << f << "\"");
    CHECK(o.message.find(f) != std::string::npos);
  }
}

// The case must finish normally (it checks its own results and throws when they are wrong).
inline void expect_success(const std::string& name, const std::function<void()>& body,
                           unsigned seconds = 60, bool limit_memory = true) {
  const Outcome o = run_forked(body, seconds, limit_memory);
  INFO("case: " << name << " -> " << describe(o));
  CHECK(o.kind == Outcome::Kind::Returned);
}

// Runs body on 4 rank threads; throws unless every rank raised a tessera::Error holding every
// one of `fragments` (the messages of all ranks must agree on them).
inline void every_rank_raises(const std::function<void(const DeviceMesh&)>& body,
                              const std::vector<std::string>& fragments) {
  std::atomic<int> raised{0};
  std::mutex mutex;
  std::string other;
  dist::run_threads(4, [&](dist::ProcessGroupPtr) {
    const DeviceMesh mesh(DeviceType::CPU, {4});
    try {
      body(mesh);
    } catch (const Error& e) {
      const std::string message = e.what();
      if (std::all_of(fragments.begin(), fragments.end(),
                      [&](const std::string& f) { return message.find(f) != std::string::npos; })) {
        ++raised;
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      other = message;
    }
  });
  if (raised.load() != 4) {
    std::ostringstream os;
    os << raised.load() << " of 4 ranks raised \"";
    for (size_t i = 0; i < fragments.size(); ++i) os << (i ? "\", \"" : "") << fragments[i];
    os << "\"";
    if (!other.empty()) os << "; another error: " << other;
    throw std::logic_error(os.str());
  }
}

inline void every_rank_raises(const std::function<void(const DeviceMesh&)>& body,
                              const std::string& fragment) {
  every_rank_raises(body, std::vector<std::string>{fragment});
}

}  // namespace tessera::robustness_test
