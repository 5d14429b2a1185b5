// Training-step time per sharding strategy: one MLP and one transformer block (each written once,
// examples/transformer_block.h), AdamW, float32, on 4 rank threads (mesh [4]; FSDP x TP on 2x2),
// beside the same step on one device.
//
// Per strategy: the median step time over the ranks' slowest (each step ends when the last rank
// ends it) and the spread (10th to 90th percentile of the steps), the forward / backward /
// optimizer split on rank 0, the collectives of one step (count and bytes, CommDebugMode) and
// the time those same collectives take alone on the same ranks (the raw collective: the floor
// communication puts under the step here), and the single-device step time divided by the
// ranks (perfect scaling) and by min(ranks, cores) (what the cores allow: rank threads share the
// machine's cores, so 4 ranks on 2 cores are at best 2x faster than one device).
//
// Issue 17 asks for the figures; issue 18's shardbench will predict them from a cost model.

#include <fmt/format.h>
#include <tessera/tessera.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "examples/transformer_block.h"

namespace ts = tessera;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr int kWarmup = 2, kSteps = 9;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

struct Model {
  std::string name;
  std::function<std::shared_ptr<ts::nn::Module>()> make;
  ts::Tensor x, y;  // the whole batch
  int64_t batch_dim_elements;
  std::map<std::string, ts::ParallelStyle> tp_plan, sp_plan;
  std::vector<std::string> fsdp_modules;
  int64_t sequence_dim;  // the dim sequence parallel shards (0: the MLP's rows)
};

struct Strategy {
  std::string name;
  ts::Shape mesh_shape;
  std::vector<std::string> names;
};

struct StepFigures {
  std::vector<double> step, forward, backward, optimizer;                  // per step, seconds
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> comms;  // name, count, bytes
  std::vector<ts::dist::CollectiveEvent> issued;  // the last step's, in order
};

// The collectives of `issued` alone, on the same groups with buffers of the same sizes
// (preallocated): seconds for all of them, the median of 5 rounds.
double replay(const std::vector<ts::dist::CollectiveEvent>& issued, const ts::DeviceMesh& mesh,
              const ts::dist::ProcessGroupPtr& world) {
  using ts::dist::CollectiveKind;
  std::vector<std::function<void()>> calls;
  for (const ts::dist::CollectiveEvent& e : issued) {
    ts::dist::ProcessGroupPtr g;
    for (int64_t d = 0; d < mesh.ndim(); ++d) {
      if (mesh.get_group(d).get() == e.group) g = mesh.get_group(d);
    }
    if (!g) throw std::runtime_error("strategies_bench: a collective on a group not of the mesh");
    const int64_t n = e.bytes / static_cast<int64_t>(ts::element_size(*e.dtype));
    const ts::Tensor whole = ts::zeros({n}, *e.dtype);
    const ts::Tensor part = ts::zeros({n / g->size()}, *e.dtype);
    const ts::dist::ReduceOp op = e.op.value_or(ts::dist::ReduceOp::Sum);
    switch (e.kind) {
      case CollectiveKind::AllReduce:
        calls.push_back([=] { g->all_reduce(whole, op)->wait(); });
        break;
      case CollectiveKind::AllGatherIntoTensor:
        calls.push_back([=] { g->all_gather_into_tensor(whole, part)->wait(); });
        break;
      case CollectiveKind::ReduceScatterTensor:
        calls.push_back([=] { g->reduce_scatter_tensor(part, whole, op)->wait(); });
        break;
      default:
        throw std::runtime_error("strategies_bench: no replay for " +
                                 std::string(ts::dist::collective_name(e.kind)));
    }
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

ts::Tensor rows(const ts::Tensor& t, int64_t dim, int64_t parts, int64_t index) {
  return t.narrow(dim, index * t.size(dim) / parts, t.size(dim) / parts);
}

// Shards `model` for strategy `s` on this rank and returns its input and target.
std::pair<ts::Tensor, ts::Tensor> shard(const Model& m, const Strategy& s, ts::nn::Module& model,
                                        const ts::DeviceMesh& mesh) {
  if (s.name == "DP") {
    ts::distribute_module(model, mesh);
    return {ts::distribute_tensor(m.x, mesh, {ts::Shard(0)}),
            ts::distribute_tensor(m.y, mesh, {ts::Shard(0)})};
  }
  if (s.name == "TP") {
    ts::parallelize_module(model, mesh, m.tp_plan);
    return {m.x, m.y};
  }
  if (s.name == "SP") {
    ts::parallelize_module(model, mesh, m.sp_plan);
    return {ts::distribute_tensor(m.x, mesh, {ts::Shard(m.sequence_dim)}),
            ts::distribute_tensor(m.y, mesh, {ts::Shard(m.sequence_dim)})};
  }
  const bool two_d = s.name == "FSDP x TP";
  if (two_d) ts::parallelize_module(model, mesh["tp"], m.tp_plan);
  const ts::DeviceMesh dp = two_d ? mesh["dp"] : mesh;
  for (const auto& [path, sub] : model.named_modules()) {
    if (std::find(m.fsdp_modules.begin(), m.fsdp_modules.end(), path) != m.fsdp_modules.end()) {
      ts::fully_shard(*sub, dp);
    }
  }
  ts::fully_shard(model, dp);
  const int64_t r = dp.get_local_rank(0);
  return {rows(m.x, 0, dp.size(), r), rows(m.y, 0, dp.size(), r)};
}

// Warm-up steps, then kSteps timed ones; the last timed step's collectives are recorded.
StepFigures train(ts::nn::Module& model, const ts::Tensor& x, const ts::Tensor& y,
                  const ts::dist::ProcessGroupPtr& world) {
  ts::optim::AdamW opt(model.parameters(), {.lr = 1e-3});
  StepFigures f;
  for (int step = 0; step < kWarmup + kSteps; ++step) {
    if (world) world->barrier();
    const bool last = step == kWarmup + kSteps - 1;
    std::optional<ts::debug::CommDebugMode> mode;
    std::optional<ts::dist::CollectiveObserverGuard> recorder;
    if (last) {
      mode.emplace();
      recorder.emplace([&f](const ts::dist::CollectiveEvent& e) { f.issued.push_back(e); });
    }
    const auto t0 = Clock::now();
    opt.zero_grad();
    const ts::Tensor out = model(x);
    const ts::Tensor d = out - y;
    const ts::Tensor loss = ts::mean(d * d);
    const double t_forward = seconds_since(t0);
    loss.backward();
    const double t_backward = seconds_since(t0) - t_forward;
    opt.step();
    const double t_all = seconds_since(t0);
    if (step < kWarmup) continue;
    f.step.push_back(t_all);
    f.forward.push_back(t_forward);
    f.backward.push_back(t_backward);
    f.optimizer.push_back(t_all - t_forward - t_backward);
    if (last) {
      const auto bytes = mode->get_comm_bytes();
      for (const auto& [name, count] : mode->get_comm_counts()) {
        f.comms.push_back({name, {count, bytes.at(name)}});
      }
    }
  }
  return f;
}

std::string comm_text(const StepFigures& f) {
  std::string s;
  for (const auto& [name, cb] : f.comms) {
    std::string shortname = name.substr(0, name.find('_', name.find('_') + 1));
    s += fmt::format("{}{} {}x {:.2f} MB", s.empty() ? "" : ", ", shortname, cb.first,
                     static_cast<double>(cb.second) / 1e6);
  }
  return s.empty() ? "none" : s;
}

void run_model(const Model& m, const std::vector<Strategy>& strategies) {
  // One device.
  ts::manual_seed(1);
  auto single = m.make();
  const StepFigures one = train(*single, m.x, m.y, nullptr);
  const double t1 = median(one.step);
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  fmt::print(
      "\n{}  (one device: step {:.2f} ms = forward {:.2f} + backward {:.2f} + AdamW {:.2f})\n",
      m.name, t1 * 1e3, median(one.forward) * 1e3, median(one.backward) * 1e3,
      median(one.optimizer) * 1e3);
  fmt::print("{:<10} {:>9} {:>15} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}  {}\n", "strategy", "step ms",
             "p10-p90 ms", "fwd ms", "bwd ms", "opt ms", "1dev/N", "1dev/cores", "raw comm",
             "collectives per step (bytes: whole messages)");
  for (const Strategy& s : strategies) {
    std::mutex mutex;
    std::vector<StepFigures> per_rank(static_cast<size_t>(s.mesh_shape.numel()));
    double raw_comm = 0;
    ts::dist::run_threads(
        static_cast<int>(s.mesh_shape.numel()), [&](ts::dist::ProcessGroupPtr world) {
          const ts::DeviceMesh mesh(ts::DeviceType::CPU, s.mesh_shape, s.names);
          ts::manual_seed(1);
          auto model = m.make();
          const auto [x, y] = shard(m, s, *model, mesh);
          StepFigures f = train(*model, x, y, world);
          // The same collectives alone: the last step's, replayed on the same
          // groups.
          const double comm = f.issued.empty() ? 0.0 : replay(f.issued, mesh, world);
          std::lock_guard<std::mutex> lock(mutex);
          raw_comm = std::max(raw_comm, comm);
          per_rank[static_cast<size_t>(world->rank())] = std::move(f);
        });
    // A step ends when its slowest rank ends it.
    std::vector<double> steps(per_rank[0].step.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      for (const StepFigures& f : per_rank) steps[i] = std::max(steps[i], f.step[i]);
    }
    const int64_t n = s.mesh_shape.numel();
    fmt::print(
        "{:<10} {:>9.2f} {:>7.2f}-{:<7.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>9.2f} {:>9.2f} {:>9.2f}  "
        "{}\n",
        s.name, median(steps) * 1e3, percentile(steps, 0.1) * 1e3, percentile(steps, 0.9) * 1e3,
        median(per_rank[0].forward) * 1e3, median(per_rank[0].backward) * 1e3,
        median(per_rank[0].optimizer) * 1e3, t1 / static_cast<double>(n) * 1e3,
        t1 / static_cast<double>(std::min(n, cores)) * 1e3, raw_comm * 1e3, comm_text(per_rank[0]));
  }
}

}  // namespace

int main() {
  ts::set_num_threads(1);
  const std::vector<Strategy> strategies{{"DP", {4}, {}},
                                         {"TP", {4}, {}},
                                         {"SP", {4}, {}},
                                         {"FSDP", {4}, {}},
                                         {"FSDP x TP", {2, 2}, {"dp", "tp"}}};
  fmt::print(
      "Training step per strategy, float32, AdamW, 4 rank threads on {} cores, medians of "
      "{} steps after {} warm-up\n",
      std::thread::hardware_concurrency(), kSteps, kWarmup);
  {
    const int64_t rows_n = 256, in = 512, hidden = 1024, out = 512;
    Model mlp{
        "MLP 256x512 -> 1024 -> 512 (GELU)",
        [=] {
          return std::make_shared<ts::nn::MLP>(
              std::vector<int64_t>{in, hidden, out},
              ts::nn::MLPOptions{.activation = ts::nn::Activation::GELU,
                                 .tensor_options = ts::kFloat32});
        },
        ts::randn({rows_n, in}),
        ts::randn({rows_n, out}),
        0,
        {{"0", ts::ColwiseParallel{}}, {"2", ts::RowwiseParallel{}}},
        {{"0", ts::ColwiseParallel{.input_layouts = ts::Shard(0)}},
         {"2", ts::RowwiseParallel{.output_layouts = ts::Shard(0), .use_local_output = false}}},
        {"0", "2"},
        0};
    run_model(mlp, strategies);
  }
  {
    const examples::BlockConfig c{.model = 256, .heads = 8, .hidden = 1024, .dtype = ts::kFloat32};
    Model block{"Transformer block B4 S128 D256 H8 hidden 1024",
                [=] { return std::make_shared<examples::TransformerBlock>(c); },
                ts::randn({4, 128, 256}),
                ts::randn({4, 128, 256}),
                0,
                examples::block_tensor_parallel_plan(),
                examples::block_sequence_parallel_plan(),
                examples::TransformerBlock::parameter_modules(),
                1};
    run_model(block, strategies);
  }
}
