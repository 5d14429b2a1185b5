// tessera-checkpoint: inspects, verifies and consolidates a distributed checkpoint directory
// (issue 53; Note [Checkpoint directory layout] in checkpoint/checkpoint.h).
//
//   tessera-checkpoint info DIR
//   tessera-checkpoint verify DIR
//   tessera-checkpoint consolidate DIR OUT.safetensors
//
// Exit status: 0 done, 1 the checkpoint or the output failed (the error says which file), 2 a
// usage error.

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tessera/collectives/dist.h"
#include "tessera/runtime/error.h"
#include "tools/checkpoint/consolidate.h"
#include "tools/checkpoint/info.h"
#include "tools/checkpoint/verify.h"

namespace ct = tessera::checkpoint_tool;

namespace {

constexpr const char* kTool = "tessera-checkpoint";

// A mistake in the command line: said in one line on stderr, exit status 2.
struct UsageError {
  std::string message;
};

struct Command {
  const char* name;
  std::vector<const char*> operands;  // positional, all required
  const char* summary;
  const char* details;
  void (*run)(const std::vector<std::string>& operands);
};

void run_info(const std::vector<std::string>& in) { fmt::print("{}", ct::info(in[0])); }

void run_verify(const std::vector<std::string>& in) {
  const ct::VerifySummary s = ct::verify(in[0]);
  fmt::print("verified {} tensors, {} chunks, {} bytes: all checksums match\n", s.tensors, s.chunks,
             s.bytes);
}

void run_consolidate(const std::vector<std::string>& in) {
  const ct::ConsolidateSummary s = ct::consolidate(in[0], in[1]);
  fmt::print("wrote {}: {} tensors, {} bytes\n", in[1], s.tensors, s.bytes);
}

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"info",
       {"DIR"},
       "lists the tensors (dtype, global shape, chunks, bytes), totals and scalars",
       "Reads only the metadata (tessera_checkpoint.json); no chunk is read or checked.\n",
       run_info},
      {"verify",
       {"DIR"},
       "reads every chunk and checks every checksum and that the chunks cover each tensor once",
       "Exits 0 when everything matches; otherwise prints the first problem (naming the file and\n"
       "the tensor) and exits 1.\n",
       run_verify},
      {"consolidate",
       {"DIR", "OUT.safetensors"},
       "writes one standard safetensors file of the full tensors",
       "Every tensor at its global shape, the scalars in \"__metadata__\" as strings (per-rank\n"
       "scalars as \"rank<r>/<name>\"). Streams in slabs of at most 64 MiB, checking the\n"
       "checksums of what it reads; writes OUT.safetensors.tmp and renames it into place, so\n"
       "that a failed run leaves no partial file.\n",
       run_consolidate},
  };
  return all;
}

std::string command_names() {
  std::string names;
  for (const Command& c : commands()) names += std::string(names.empty() ? "" : ", ") + c.name;
  return names;
}

std::string synopsis(const Command& c) {
  std::string s = fmt::format("{} {}", kTool, c.name);
  for (const char* operand : c.operands) s += fmt::format(" {}", operand);
  return s;
}

std::string tool_help() {
  std::string s = fmt::format("usage: {} COMMAND ARGS...\n\ncommands:\n", kTool);
  for (const Command& c : commands()) s += fmt::format("  {}\n      {}\n", synopsis(c), c.summary);
  s += fmt::format(
      "\n{} COMMAND --help describes a command. Exit status: 0 done, 1 the checkpoint or the\n"
      "output failed (the message names the file), 2 a usage error.\n",
      kTool);
  return s;
}

std::string command_help(const Command& c) {
  return fmt::format("usage: {}\n\n{}: {}.\n{}", synopsis(c), c.name, c.summary, c.details);
}

// The command's operands from its arguments. "--" ends the flags (a path that starts with '-').
std::vector<std::string> operands(const Command& c, const std::vector<std::string>& args) {
  const std::string where = fmt::format("[{} {}]", kTool, c.name);
  std::vector<std::string> out;
  bool flags = true;
  for (const std::string& a : args) {
    if (flags && a == "--") {
      flags = false;
    } else if (flags && a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format("{} unknown flag {}; its only flag is --help (-h); usage: {}",
                                   where, a, synopsis(c))};
    } else if (out.size() == c.operands.size()) {
      throw UsageError{
          fmt::format("{} unexpected argument '{}'; usage: {}", where, a, synopsis(c))};
    } else {
      out.push_back(a);
    }
  }
  if (out.size() < c.operands.size()) {
    throw UsageError{
        fmt::format("{} missing {}; usage: {}", where, c.operands[out.size()], synopsis(c))};
  }
  return out;
}

bool asks_help(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

// Under an MPI launcher every process would run the command, and several consolidates would race
// on one output file: the launcher's rank 0 runs it, the others exit at once (before the
// arguments, so that a usage error is said once).
bool runs_in_this_process() {
  if (!tessera::dist::started_by_launcher()) return true;
  const int processes = tessera::dist::launcher_world_size().value_or(1);
  if (processes <= 1) return true;
  if (tessera::dist::launcher_rank().value_or(0) != 0) return false;
  fmt::print(stderr,
             "{}: started by an MPI launcher as {} processes; it runs in the launcher's rank 0 "
             "alone. Start it without the launcher.\n",
             kTool, processes);
  return true;
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) {
    throw UsageError{fmt::format("[{}] no command given; valid commands: {}; see {} --help", kTool,
                                 command_names(), kTool)};
  }
  const std::string& name = args[0];
  if (name == "--help" || name == "-h") {
    fmt::print("{}", tool_help());
    return 0;
  }
  const Command* command = nullptr;
  for (const Command& c : commands()) {
    if (name == c.name) command = &c;
  }
  if (command == nullptr && name.size() > 1 && name[0] == '-') {
    throw UsageError{fmt::format(
        "[{}] unknown flag {}; the only flag before a command is --help (-h); valid commands: {}",
        kTool, name, command_names())};
  }
  if (command == nullptr) {
    throw UsageError{fmt::format("[{}] unknown command '{}'; valid commands: {}; see {} --help",
                                 kTool, name, command_names(), kTool)};
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (asks_help(rest)) {
    fmt::print("{}", command_help(*command));
    return 0;
  }
  command->run(operands(*command, rest));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!runs_in_this_process()) return 0;
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    fmt::print(stderr, "{}\n", e.message);
    return 2;
  } catch (const tessera::Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    // Outside Tessera's own errors (std::filesystem, an allocation): still the reason, still 1.
    fmt::print(stderr, "[{}] {}\n", kTool, e.what());
    return 1;
  }
}
