#pragma once
// Runs a command line through the shell and collects what it prints: the CLI tests' way of running
// the tools as a user does (tests/tools, tests/robustness).

#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace tessera::test {

struct CommandResult {
  int status = -1;     // exit status, or 128 + signal
  std::string output;  // stdout, and stderr where the command line sends it there (2>&1)
};

inline CommandResult run_command(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  CommandResult r;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace tessera::test
