#include "tools/shardbench/measure.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>

#include "tessera/collectives/wait_timer.h"
#include "tools/shardbench/ranks.h"

namespace tessera::shardbench {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct RankFigures {
  std::vector<double> step, forward, backward, optimizer, exposed, losses;
  std::vector<dist::CollectiveEvent> issued;  // of the last step
  int64_t peak_bytes = 0;
};

std::string mesh_dim_of(const dist::ProcessGroup* g, const DeviceMesh* mesh) {
  for (int64_t d = 0; mesh != nullptr && d < mesh->ndim(); ++d) {
    if (mesh->get_group(d).get() == g) {
      return mesh->mesh_dim_names().empty() ? std::to_string(d) : mesh->mesh_dim_names()[d];
    }
  }
  return "?";
}

std::vector<CollectiveTotal> totals(const std::vector<dist::CollectiveEvent>& issued,
                                    const DeviceMesh* mesh) {
  std::map<std::pair<std::string, std::string>, CollectiveTotal> by;
  for (const dist::CollectiveEvent& e : issued) {
    const std::string kind(dist::collective_name(e.kind));
    CollectiveTotal& t = by[{kind, mesh_dim_of(e.group, mesh)}];
    t.kind = kind;
    t.mesh_dim = mesh_dim_of(e.group, mesh);
    t.group_size = e.group->size();
    t.count += 1;
    t.bytes += e.bytes;
  }
  std::vector<CollectiveTotal> out;
  for (auto& [key, t] : by) out.push_back(t);
  return out;
}

// Every rank records the collectives it issues in the step being traced.
dist::CollectiveObserver recorder_into(std::vector<dist::CollectiveEvent>& events) {
  return [&events](const dist::CollectiveEvent& e) { events.push_back(e); };
}

// The collectives of `issued` alone on the same groups (preallocated buffers of the same sizes):
// the median of 5 rounds. Where DTensor's shards are uneven a call's message differs between the
// ranks (all_to_all_single's is the rank's own input): every rank replays the largest, so that
// the calls match.
double replay(const std::vector<dist::CollectiveEvent>& issued, const DeviceMesh& mesh,
              const dist::ProcessGroupPtr& world) {
  std::vector<const dist::CollectiveEvent*> events;
  std::vector<dist::ProcessGroupPtr> groups;
  std::vector<int64_t> elements;
  for (const dist::CollectiveEvent& e : issued) {
    dist::ProcessGroupPtr g;
    for (int64_t d = 0; d < mesh.ndim(); ++d) {
      if (mesh.get_group(d).get() == e.group) g = mesh.get_group(d);
    }
    if (!g || !e.dtype.has_value()) continue;  // not a mesh dim's collective: not replayed
    events.push_back(&e);
    groups.push_back(g);
    elements.push_back(e.bytes / static_cast<int64_t>(element_size(*e.dtype)));
  }
  if (!elements.empty()) {
    const Tensor largest = from_vector(elements, {static_cast<int64_t>(elements.size())});
    world->all_reduce(largest, dist::ReduceOp::Max)->wait();
    elements = largest.to_vector<int64_t>();
  }
  std::vector<std::function<void()>> calls;
  for (size_t i = 0; i < events.size(); ++i) {
    calls.push_back(collective_call(events[i]->kind, groups[i], elements[i], *events[i]->dtype,
                                    events[i]->op.value_or(dist::ReduceOp::Sum)));
  }
  std::vector<double> rounds;
  for (int round = 0; round < 6; ++round) {
    world->barrier();
    const auto t0 = Clock::now();
    for (const auto& call : calls) call();
    if (round > 0) rounds.push_back(seconds_since(t0));
  }
  return median(rounds);
}

RankFigures train(const Strategy& s, const ModelConfig& c, const RunOptions& o,
                  const DeviceMesh* mesh, const dist::ProcessGroupPtr& world,
                  const std::function<void()>& progress) {
  const Batch batch = make_batch(c);
  auto model = make_model(c);
  const RankData data = mesh == nullptr ? RankData{batch.input, batch.target, false}
                                        : apply_strategy(s, c, *model, *mesh, batch);
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  RankFigures f;
  reset_peak_cpu_memory_stats();
  const dist::CollectiveWaitTimer blocked;
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    if (world) world->barrier();
    const bool last = step == o.warmup + o.steps - 1;
    std::optional<dist::CollectiveObserverGuard> recorder;
    if (last) recorder.emplace(recorder_into(f.issued));
    const double blocked_before = blocked.seconds();
    const auto t0 = Clock::now();
    opt.zero_grad();
    Tensor loss;
    {
      std::optional<LossParallelGuard> loss_parallel;
      if (data.loss_parallel) loss_parallel.emplace();
      loss = loss_of(c, (*model)(data.input), data.target);
    }
    const double t_forward = seconds_since(t0);
    loss.backward();
    const double t_backward = seconds_since(t0) - t_forward;
    opt.step();
    const double t_all = seconds_since(t0);
    const double t_blocked = blocked.seconds() - blocked_before;
    recorder.reset();
    f.losses.push_back(mesh == nullptr ? loss.item<double>() : whole_loss(s, loss, *mesh));
    if (progress) progress();
    if (step < o.warmup) continue;
    f.step.push_back(t_all);
    f.forward.push_back(t_forward);
    f.backward.push_back(t_backward);
    f.optimizer.push_back(t_all - t_forward - t_backward);
    f.exposed.push_back(t_blocked);
  }
  f.peak_bytes = cpu_allocator_stats().peak_bytes;
  return f;
}

}  // namespace

std::function<void()> collective_call(dist::CollectiveKind kind, const dist::ProcessGroupPtr& g,
                                      int64_t elements, DType dtype, dist::ReduceOp op) {
  const int64_t n = g->size();
  const int64_t blocks = ceil_div(elements, n) * n;
  switch (kind) {
    case dist::CollectiveKind::AllReduce: {
      const Tensor whole = zeros({elements}, dtype);
      return [=] { g->all_reduce(whole, op)->wait(); };
    }
    case dist::CollectiveKind::AllGatherIntoTensor: {
      const Tensor whole = zeros({blocks}, dtype), part = zeros({blocks / n}, dtype);
      return [=] { g->all_gather_into_tensor(whole, part)->wait(); };
    }
    case dist::CollectiveKind::AllGather: {
      std::vector<Tensor> parts;
      const int64_t chunk = ceil_div(elements, n);
      for (int64_t r = 0; r < n; ++r) {
        parts.push_back(zeros({std::clamp<int64_t>(elements - r * chunk, 0, chunk)}, dtype));
      }
      const Tensor mine = zeros({parts[static_cast<size_t>(g->rank())].numel()}, dtype);
      return [=] { g->all_gather(parts, mine)->wait(); };
    }
    case dist::CollectiveKind::ReduceScatterTensor: {
      const Tensor whole = zeros({blocks}, dtype), part = zeros({blocks / n}, dtype);
      return [=] { g->reduce_scatter_tensor(part, whole, op)->wait(); };
    }
    case dist::CollectiveKind::AllToAllSingle: {
      const Tensor in = zeros({blocks}, dtype), out = zeros({blocks}, dtype);
      return [=] { g->all_to_all_single(out, in)->wait(); };
    }
    default:
      TS_CHECK(false, "[tessera-shardbench] no timing for collective ", dist::collective_name(kind),
               "; timed: all_reduce, all_gather_into_tensor, all_gather, reduce_scatter_tensor, "
               "all_to_all_single");
  }
  return {};
}

double tracing_seconds_per_event() {
  constexpr int kEvents = 20000;
  const dist::CollectiveEvent event{
      dist::CollectiveKind::AllReduce, nullptr, 4096, kFloat32, dist::ReduceOp::Sum, false};
  std::vector<dist::CollectiveEvent> events;
  auto notify_all = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < kEvents; ++i) dist::detail::notify_observers(event);
    return seconds_since(t0);
  };
  std::vector<double> traced, bare;
  for (int round = 0; round < 5; ++round) {
    bare.push_back(notify_all());  // the check every collective makes anyway
    events.clear();
    const dist::CollectiveObserverGuard guard(recorder_into(events));
    traced.push_back(notify_all());
  }
  return std::max(0.0, median(traced) - median(bare)) / kEvents;
}

Measurement combine_rounds(const std::vector<Measurement>& rounds) {
  TS_CHECK(!rounds.empty(), "[tessera-shardbench] combine_rounds needs at least one round");
  Measurement m = rounds.front();
  m.step_s.clear();
  m.forward_steps_s.clear();
  m.backward_steps_s.clear();
  m.optimizer_steps_s.clear();
  m.exposed_comm_steps_s.clear();
  const auto append = [](std::vector<double>& to, const std::vector<double>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  std::vector<double> comm_alone;
  for (const Measurement& r : rounds) {
    append(m.step_s, r.step_s);
    append(m.forward_steps_s, r.forward_steps_s);
    append(m.backward_steps_s, r.backward_steps_s);
    append(m.optimizer_steps_s, r.optimizer_steps_s);
    append(m.exposed_comm_steps_s, r.exposed_comm_steps_s);
    comm_alone.push_back(r.comm_alone_s);
    m.peak_bytes = std::max(m.peak_bytes, r.peak_bytes);
    m.tracing_s = std::max(m.tracing_s, r.tracing_s);
  }
  m.forward_s = median(m.forward_steps_s);
  m.backward_s = median(m.backward_steps_s);
  m.optimizer_s = median(m.optimizer_steps_s);
  m.exposed_comm_s = median(m.exposed_comm_steps_s);
  m.comm_alone_s = median(comm_alone);
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

Measurement measure(const Strategy& s, const ModelConfig& c, const RunOptions& o,
                    const std::function<void()>& progress) {
  Measurement m;
  const auto set_rank0_figures = [&m](const RankFigures& f) {
    m.forward_steps_s = f.forward;
    m.backward_steps_s = f.backward;
    m.optimizer_steps_s = f.optimizer;
    m.forward_s = median(m.forward_steps_s);
    m.backward_s = median(m.backward_steps_s);
    m.optimizer_s = median(m.optimizer_steps_s);
    m.losses = f.losses;
  };
  if (s.kind == StrategyKind::Single) {
    const RankFigures f = train(s, c, o, nullptr, nullptr, progress);
    m.step_s = f.step;
    m.exposed_comm_steps_s = f.exposed;
    m.exposed_comm_s = median(f.exposed);
    m.peak_bytes = f.peak_bytes;
    set_rank0_figures(f);
    return m;
  }
  run_ranks(s.mesh_shape.numel(), [&](const dist::ProcessGroupPtr& world) {
    const DeviceMesh mesh(DeviceType::CPU, s.mesh_shape, s.dim_names);
    const bool rank0 = world->rank() == 0;
    const RankFigures f = train(s, c, o, &mesh, world, rank0 ? progress : std::function<void()>());
    const double alone = replay(f.issued, mesh, world);
    // The slowest rank's figures, by a collective: on processes no rank can read another's
    // (Note [One program, both worlds] in ranks.h).
    std::vector<double> slowest = f.step;
    slowest.push_back(static_cast<double>(f.peak_bytes));
    slowest.push_back(alone);
    slowest.push_back(static_cast<double>(f.issued.size()));
    const Tensor reduced = from_vector(slowest, {static_cast<int64_t>(slowest.size())});
    world->all_reduce(reduced, dist::ReduceOp::Max)->wait();
    // The least blocked rank's time per step: the others' also hold their waits for that rank
    // (another's compute, or on shared cores its turn), not the communication itself.
    const Tensor least_blocked = from_vector(f.exposed, {static_cast<int64_t>(f.exposed.size())});
    world->all_reduce(least_blocked, dist::ReduceOp::Min)->wait();
    if (!rank0) return;
    slowest = reduced.to_vector<double>();
    const size_t steps = f.step.size();
    m.step_s.assign(slowest.begin(), slowest.begin() + static_cast<std::ptrdiff_t>(steps));
    m.exposed_comm_steps_s = least_blocked.to_vector<double>();
    m.exposed_comm_s = median(m.exposed_comm_steps_s);
    m.peak_bytes = static_cast<int64_t>(slowest[steps]);
    m.comm_alone_s = slowest[steps + 1];
    m.tracing_s = tracing_seconds_per_event() * slowest[steps + 2];
    m.collectives = totals(f.issued, &mesh);
    set_rank0_figures(f);
  });
  return m;
}

}  // namespace tessera::shardbench
