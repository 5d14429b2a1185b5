#pragma once
// Measuring a strategy: warm-up steps, then timed AdamW steps on the run's ranks (rank threads or
// a launched job's processes: ranks.h), with the collectives of a step by kind and mesh dim, peak
// memory per rank and the losses.

#include <functional>
#include <string>
#include <vector>

#include "tools/shardbench/strategy.h"

namespace tessera::shardbench {

struct RunOptions {
  int steps = 4;   // timed, per round
  int warmup = 1;  // per round
  int rounds = 3;  // over all strategies (the tool's loop; measure() runs one)
};

// The collectives of one kind on one mesh dim in one step (rank 0's).
struct CollectiveTotal {
  std::string kind;      // "all_reduce", "all_gather_into_tensor", ...
  std::string mesh_dim;  // the mesh dim's name, or its index
  int group_size = 0;
  int64_t count = 0;
  int64_t bytes = 0;  // whole messages (collectives/observer.h)
  bool operator==(const CollectiveTotal&) const = default;
};

struct Measurement {
  std::vector<double> step_s;  // per timed step, the slowest rank's
  // Rank 0's phases of each timed step, and their medians: over the same steps as step_s's
  // median (a median of per-round medians once read forward 34.2 ms against a step of 23.5).
  std::vector<double> forward_steps_s, backward_steps_s, optimizer_steps_s;
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double comm_alone_s = 0;  // the step's collectives replayed alone on the same groups
  // Exposed communication: per timed step the time the least blocked rank spent blocked in
  // collectives (a synchronous call, a wait on an asynchronous one: dist::CollectiveWaitTimer),
  // and its median. Communication in flight while a rank computes is not in it; the other ranks'
  // blocked time also holds their waits for that rank.
  std::vector<double> exposed_comm_steps_s;
  double exposed_comm_s = 0;
  std::vector<CollectiveTotal> collectives;
  int64_t peak_bytes = 0;      // the largest over ranks of the tensor memory high-water mark
  std::vector<double> losses;  // per step (warm-up included), the whole batch's
  // The tool's own cost in a step: recording each collective (observer notification and the
  // record), timed per event, times the most events a rank issued in a step.
  double tracing_s = 0;
};

// One round: `o.warmup + o.steps` steps. `progress` is called after each step of rank 0 (for a
// progress bar); may be empty.
Measurement measure(const Strategy& s, const ModelConfig& c, const RunOptions& o,
                    const std::function<void()>& progress);

// Rounds of one strategy as one measurement: every round's timed steps and their phases (the
// medians over all of them), the median of the rounds' replayed collectives, the largest peak
// memory and tracing cost, the first round's losses and collectives (the same every round).
Measurement combine_rounds(const std::vector<Measurement>& rounds);

// One call of a collective of `kind` on group g over preallocated buffers: the whole message of
// `elements` (the gathered output, the scattered input, the all_reduce's and all_to_all's buffer)
// and its 1/g share. all_gather (a list of outputs: what DTensor issues for uneven shards) gathers
// the torch.chunk parts of the message; the kinds that split it into g equal blocks round an
// uneven one up to a multiple of g. Error for the kinds a training step does not issue.
std::function<void()> collective_call(dist::CollectiveKind kind, const dist::ProcessGroupPtr& g,
                                      int64_t elements, DType dtype, dist::ReduceOp op);

// Seconds the tool spends recording one collective event.
double tracing_seconds_per_event();

double median(std::vector<double> v);
double percentile(std::vector<double> v, double p);

}  // namespace tessera::shardbench
