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

#include <CLI/CLI.hpp>
#include <cstddef>
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

// The first argument `c` did not take, from CLI11's list of them in order; "--" ends the flags
// (a path that starts with '-' is an operand after it).
void refuse_extras(const Command& c, const std::vector<std::string>& extras) {
  const std::string where = fmt::format("[{} {}]", kTool, c.name);
  bool flags = true;
  for (const std::string& a : extras) {
    if (flags && a == "--") {
      flags = false;
    } else if (flags && a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format("{} unknown flag {}; its only flag is --help (-h); usage: {}",
                                   where, a, synopsis(c))};
    } else {
      throw UsageError{
          fmt::format("{} unexpected argument '{}'; usage: {}", where, a, synopsis(c))};
    }
  }
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

// What the command line asks for.
struct Invocation {
  bool tool_help = false;
  const Command* command = nullptr;  // with tool_help false: the command, never null
  bool command_help = false;
  std::vector<std::string> operands;
};

// The command line as CLI11 reads it; UsageError for a mistake in it. --help (-h) wins over the
// mistakes around it: the tool's over every other, a command's over those in its arguments.
Invocation read_command_line(int argc, char** argv) {
  CLI::App app(kTool);
  // The help texts are ours (tool_help, command_help), and the arguments CLI11 does not take are
  // named here, in the words of the command they were given to; the commands inherit both.
  app.set_help_flag();
  app.allow_extras();
  // One command: after it, another command's name is an operand (a directory named "info") or
  // an unexpected argument.
  app.require_subcommand(0, 1);
  Invocation in;
  app.add_flag("-h,--help", in.tool_help);
  CLI::App* given = nullptr;
  size_t before_command = 0;  // how many of the tool's unknown arguments precede the command
  for (const Command& c : commands()) {
    CLI::App* sub = app.add_subcommand(c.name);
    sub->add_flag("-h,--help", in.command_help);
    for (const char* operand : c.operands) sub->add_option(operand);
    sub->preparse_callback([&, sub](size_t) {
      in.command = &c;
      given = sub;
      before_command = app.remaining().size();
    });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw UsageError{fmt::format("[{}] {}; see {} --help", kTool, e.what(), kTool)};
  }
  if (in.tool_help) return in;
  const std::vector<std::string> unknown = app.remaining();
  const size_t before = given == nullptr ? unknown.size() : before_command;
  if (before > 0) {
    const std::string& name = unknown.front();
    if (name.size() > 1 && name[0] == '-') {
      throw UsageError{fmt::format(
          "[{}] unknown flag {}; the only flag before a command is --help (-h); valid commands: "
          "{}",
          kTool, name, command_names())};
    }
    throw UsageError{fmt::format("[{}] unknown command '{}'; valid commands: {}; see {} --help",
                                 kTool, name, command_names(), kTool)};
  }
  if (given == nullptr) {
    throw UsageError{fmt::format("[{}] no command given; valid commands: {}; see {} --help", kTool,
                                 command_names(), kTool)};
  }
  if (in.command_help) return in;
  std::vector<std::string> extras = given->remaining();
  if (unknown.size() > before) {
    // CLI11 hands what follows a "--" after the last operand back to the tool.
    extras.emplace_back("--");
    extras.insert(extras.end(), unknown.begin() + static_cast<std::ptrdiff_t>(before),
                  unknown.end());
  }
  refuse_extras(*in.command, extras);
  for (const char* operand : in.command->operands) {
    const CLI::Option* value = given->get_option(operand);
    if (value->count() == 0) {
      throw UsageError{fmt::format("[{} {}] missing {}; usage: {}", kTool, in.command->name,
                                   operand, synopsis(*in.command))};
    }
    in.operands.push_back(value->results().front());
  }
  return in;
}

int run(int argc, char** argv) {
  const Invocation in = read_command_line(argc, argv);
  if (in.tool_help) {
    fmt::print("{}", tool_help());
  } else if (in.command_help) {
    fmt::print("{}", command_help(*in.command));
  } else {
    in.command->run(in.operands);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!runs_in_this_process()) return 0;
    return run(argc, argv);
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
