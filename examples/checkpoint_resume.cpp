// Checkpoint and resume, as a training engine does it: the spirals MLP of mlp_train.cpp, fully
// sharded (FSDP2) over 4 rank threads or the processes of `mpirun -n 4`, trained with AdamW and
// dropout; a checkpoint every kEvery steps (async_save: the loop goes on while it is written).
// The run is interrupted after kStop steps, and a second run, from other initial weights, resumes
// from the latest checkpoint. Exits non-zero unless the resumed losses equal the uninterrupted
// run's bitwise.
//
//   checkpoint_resume [DIR]   (default: a fresh folder under /tmp, removed at the end; under
//                              mpirun, DIR is required: a folder every process sees)

#include <tessera/tessera.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "spirals.h"

namespace ts = tessera;
namespace ckpt = ts::checkpoint;

namespace {

constexpr int64_t kSteps = 40, kEvery = 10, kStop = 25, kRanks = 4;

// Trains from the latest checkpoint in `dir` (if any) up to `stop` steps; returns the loss of
// each step it ran, by step.
std::vector<double> train(const std::string& dir, uint64_t seed, int64_t stop) {
  const ts::DeviceMesh mesh(ts::DeviceType::CPU, {kRanks}, {"dp"});
  ts::manual_seed(seed);
  ts::nn::MLP net(
      {2, 32, 32, examples::kClasses},
      {.dropout = 0.1, .tensor_options = ts::kFloat64});  // dropout: the generator matters
  ts::fully_shard(net, mesh);
  ts::optim::AdamW optimizer(net.parameters(), {.lr = 0.01});

  int64_t first = 0;
  if (std::filesystem::exists(dir + "/tessera_checkpoint.json")) {
    ckpt::StateDict sd = ckpt::get_state_dict(net, &optimizer);  // aliases the live tensors
    ckpt::load(sd, dir);                                         // in place, resharded
    ckpt::set_state_dict(net, &optimizer, sd);                   // step counts, generator
    first = std::get<int64_t>(sd.scalars.at("step"));
  }
  ts::Generator data_gen(2024);
  examples::Dataset data = examples::spirals(data_gen);
  const int64_t rows = data.x.size(0) / kRanks, rank = mesh.get_local_rank(0);
  const ts::Tensor x = data.x.to(ts::kFloat64).narrow(0, rank * rows, rows);
  const ts::Tensor y = data.y.narrow(0, rank * rows, rows);

  std::vector<double> losses(static_cast<size_t>(stop), 0.0);
  std::future<void> saving;
  for (int64_t step = first; step < stop; ++step) {
    optimizer.zero_grad();
    ts::Tensor loss = ts::cross_entropy(net(x), y);
    loss.backward();
    optimizer.step();
    losses[static_cast<size_t>(step)] = loss.item<double>();
    if ((step + 1) % kEvery == 0) {
      ckpt::StateDict now = ckpt::get_state_dict(net, &optimizer);
      now.scalars["step"] = step + 1;
      saving = ckpt::async_save(now, dir);  // copied now, written in the background
    }
  }
  if (saving.valid()) saving.get();  // raises what the write raised
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  const bool launched = ts::dist::started_by_launcher();
  const bool temporary = argc < 2;
  if (temporary && launched) {
    std::fprintf(stderr, "checkpoint_resume: under a launcher, give a DIR every process sees\n");
    return 2;
  }
  std::string dir = temporary ? "" : argv[1];
  if (temporary) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-resume-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return 1;
    dir = pattern;
  }
  std::vector<double> uninterrupted, resumed;
  const auto run = [&](ts::dist::ProcessGroupPtr world) {
    if (world->rank() == 0) {
      std::filesystem::remove_all(dir + "/uninterrupted");
      std::filesystem::remove_all(dir + "/interrupted");
    }
    world->barrier()->wait();
    std::vector<double> a = train(dir + "/uninterrupted", 7, kSteps);  // the reference
    train(dir + "/interrupted", 7, kStop);                             // "killed" after kStop steps
    std::vector<double> b = train(dir + "/interrupted", 99, kSteps);  // other weights: all replaced
    if (world->rank() == 0) {
      uninterrupted = a;
      resumed = b;
    }
  };
  if (launched) {
    const ts::dist::ProcessGroupPtr world = ts::dist::init_process_group();
    run(world);
    if (world->rank() != 0) return 0;
  } else {
    ts::dist::run_threads(kRanks, run);
  }
  // The resumed run restarts at the last checkpoint before kStop.
  const int64_t from = kStop / kEvery * kEvery;
  int mismatches = 0;
  for (int64_t step = from; step < kSteps; ++step) {
    const auto s = static_cast<size_t>(step);
    if (uninterrupted[s] != resumed[s]) ++mismatches;
    if (step % 5 == 0 || uninterrupted[s] != resumed[s]) {
      std::printf("step %2lld  loss %.17g  resumed %.17g%s\n", static_cast<long long>(step),
                  uninterrupted[s], resumed[s], uninterrupted[s] != resumed[s] ? "  DIFFERS" : "");
    }
  }
  std::printf("resumed from step %lld on %s: %s\n", static_cast<long long>(from),
              launched ? "4 processes" : "4 rank threads",
              mismatches == 0 ? "every loss equals the uninterrupted run's" : "losses differ");
  if (temporary) std::filesystem::remove_all(dir);
  return mismatches == 0 ? 0 : 1;
}
