#pragma once
// What the ranks of a save or load tell each other: strings (a rank's part of the metadata, its
// error), so that a failure on one rank raises on every rank instead of leaving the others
// waiting, and rank 0 can write the metadata of all.

#include <exception>
#include <string>
#include <vector>

#include "tessera/collectives/process_group.h"

namespace tessera::checkpoint::detail {

// The world of the calling rank (inside run_threads or after init_process_group); null in a
// program that is not distributed (a single rank, no collectives).
dist::ProcessGroupPtr world_or_null();

// Every rank's string, by rank (mine alone with a null group).
std::vector<std::string> all_gather_strings(dist::ProcessGroup* group, const std::string& mine);

// Raises on every rank when any rank's `error` is non-empty: the first failing rank's message
// (with its rank, and how many failed), as a CheckpointError, or as the caller's own exception
// on the rank that failed, so its type survives.
void raise_if_any_failed(dist::ProcessGroup* group, const std::string& error,
                         std::exception_ptr mine = nullptr);
// The same over strings already gathered (`errors[r]` empty: rank r succeeded).
void raise_first_error(const std::vector<std::string>& errors, std::exception_ptr mine);

// Runs `step` and returns its error message ("" when it succeeded), keeping its exception.
template <typename F>
std::string capture_error(F&& step, std::exception_ptr& exception) {
  try {
    step();
    return {};
  } catch (const std::exception& e) {
    exception = std::current_exception();
    return e.what()[0] != '\0' ? e.what() : "unknown error";
  }
}

}  // namespace tessera::checkpoint::detail
