// Tensor-parallel training, written as an SPMD program: the spirals MLP of mlp_train.cpp
// (2-64-64-3, AdamW), its layers sharded with PyTorch's parallel styles over 4 rank threads, or,
// started by a launcher (mpirun -n N tp_train), over the N processes of the launched world, the
// same code either way; its loss is computed without gathering the logits (LossParallelGuard).
// Each rank builds the same model from the same seed, shards it, and trains it; rank 0 prints
// the loss beside the single-device run's. Exits non-zero when they differ or the accuracy
// misses 95%.

#include <tessera/tessera.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "spirals.h"

namespace ts = tessera;

namespace {

using examples::Dataset;
using examples::kClasses;

constexpr int kSteps = 300;
constexpr int kLogEvery = 50;
constexpr int kRanks = 4;

// The spirals of mlp_train.cpp, in float64.
Dataset spirals() {
  ts::Generator gen(2024);
  Dataset d = examples::spirals(gen);
  d.x = d.x.to(ts::kFloat64);
  return d;
}

std::shared_ptr<ts::nn::MLP> make_model() {
  ts::manual_seed(7);  // every rank (and the single-device run) draws the same initial weights
  // float64: 300 AdamW steps amplify float32's summation-order differences to ~5e-4 in the
  // loss; in float64 the sharded run follows the single-device one to ~1e-12.
  return std::make_shared<ts::nn::MLP>(std::vector<int64_t>{2, 64, 64, kClasses},
                                       ts::nn::MLPOptions{.tensor_options = ts::kFloat64});
}

// Trains `model` and returns the loss of every step; `sharded` wraps the loss in a
// LossParallelGuard (the logits arrive sharded on the class dim).
std::vector<double> train(ts::nn::Module& model, const Dataset& data, bool sharded) {
  ts::optim::AdamW optimizer(model.parameters(), {.lr = 0.01, .weight_decay = 1e-4});
  std::vector<double> losses;
  for (int step = 1; step <= kSteps; ++step) {
    optimizer.zero_grad();
    ts::Tensor loss;
    if (sharded) {
      ts::LossParallelGuard loss_parallel;
      loss = ts::cross_entropy(model(data.x), data.y);
    } else {
      loss = ts::cross_entropy(model(data.x), data.y);
    }
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

double accuracy(ts::nn::Module& model, const Dataset& data) {
  ts::NoGradGuard no_grad;
  ts::Tensor logits = model(data.x);
  if (logits.is_distributed()) logits = logits.full_tensor();
  const ts::Tensor predicted = ts::argmax(logits, 1);
  return ts::sum(predicted == data.y).item<double>() / static_cast<double>(data.y.numel());
}

// One rank's part, the same on rank threads and on launched processes: the model sharded over
// the world's ranks, trained; the losses and accuracy it reaches.
struct ShardedRun {
  std::vector<double> losses;
  double accuracy = 0.0;
};

ShardedRun train_sharded(const ts::dist::ProcessGroupPtr& world, const Dataset& data) {
  const ts::DeviceMesh mesh(ts::DeviceType::CPU, {world->size()}, {"tp"});
  auto model = make_model();
  // Layers 0 -> 2 as Megatron's MLP (no collective between them, one all_reduce after 2);
  // layer 4 column-sharded, its logits left sharded on the class dim for the loss.
  ts::parallelize_module(*model, mesh,
                         {{"0", ts::ColwiseParallel{}},
                          {"2", ts::RowwiseParallel{}},
                          {"4", ts::ColwiseParallel{.use_local_output = false}}});
  ShardedRun run;
  run.losses = train(*model, data, true);
  run.accuracy = accuracy(*model, data);
  return run;
}

}  // namespace

int main() {
  const Dataset data = spirals();
  ShardedRun got;
  int ranks = kRanks;
  const char* ranks_are = "rank threads";
  if (ts::dist::started_by_launcher()) {
    // mpirun -n N: this process is one rank of the launched world.
    const ts::dist::ProcessGroupPtr world = ts::dist::init_process_group();
    got = train_sharded(world, data);
    ranks = world->size();
    ranks_are = "processes";
    if (world->rank() != 0) return 0;  // rank 0 compares and reports
  } else {
    ts::dist::run_threads(kRanks, [&](ts::dist::ProcessGroupPtr world) {
      ShardedRun mine = train_sharded(world, data);
      if (world->rank() == 0) got = std::move(mine);
    });
  }
  auto single = make_model();
  const std::vector<double> want = train(*single, data, false);

  std::printf(
      "3-class spirals, MLP 2-64-64-3, AdamW, %d steps: one device vs tensor parallel "
      "on %d %s\n",
      kSteps, ranks, ranks_are);
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got.losses[i] - want[i]));
    if (i == 0 || (i + 1) % kLogEvery == 0) {
      std::printf("step %4zu  loss %.6f  sharded %.6f\n", i + 1, want[i], got.losses[i]);
    }
  }
  std::printf(
      "largest loss difference %.2e (summation order differs); sharded train "
      "accuracy %.1f%%\n",
      worst, 100.0 * got.accuracy);
  if (worst > 1e-9 || got.accuracy < 0.95) {
    std::printf("FAILED: the sharded run drifted from one device or missed 95%% accuracy\n");
    return 1;
  }
  return 0;
}
