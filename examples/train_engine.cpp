// A complete engine loop, as a C++ training engine embeds Tessera: tessera-shardbench's transformer
// under FSDP x TP on a 2x2 mesh ("dp" x "tp"), a data loader that gives each data-parallel rank
// its rows, AdamW with a warm-up + cosine learning-rate schedule, gradient clipping over the
// DTensor parameters, a checkpoint every --every steps (async_save) and a resume from the latest
// one on start, and a log line per step. The same source runs on 4 rank threads or, started by
// mpirun -n 4, on the launched processes.
//
//   train_engine [--steps N] [--every N] [--stop-at N] [--dir DIR]
//
// --dir: where checkpoints go; a run finding one there resumes from it (default: a fresh
// folder, removed at the end). --stop-at N: stop after step N, as if the job were killed there.

#include <tessera/tessera.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "tools/shardbench/model.h"
#include "tools/shardbench/strategy.h"

namespace ts = tessera;
namespace sb = tessera::shardbench;
namespace ckpt = tessera::checkpoint;

namespace {

struct Flags {
  int64_t steps = 40;
  int64_t every = 10;
  int64_t stop_at = -1;
  std::string dir;
};

// Exits 2 with one line on a bad command line.
Flags parse(int argc, char** argv) {
  Flags f;
  const auto usage = [](const std::string& why) {
    std::fprintf(stderr,
                 "train_engine: %s\nusage: train_engine [--steps N] [--every N] [--stop-at N] "
                 "[--dir DIR]\n",
                 why.c_str());
    std::exit(2);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--dir") {
      f.dir = value;
      continue;
    }
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (end == value.c_str() || *end != '\0' || n < 1)
      usage(flag + " needs a positive integer, got '" + value + "'");
    if (flag == "--steps") {
      f.steps = n;
    } else if (flag == "--every") {
      f.every = n;
    } else if (flag == "--stop-at") {
      f.stop_at = n;
    } else {
      usage("unknown flag " + flag);
    }
  }
  return f;
}

// Each step's batch, the same whoever asks: random tokens, and as targets a fixed function of
// each token (a lookup the model can learn); each data-parallel rank takes its rows.
class ShardedLoader {
 public:
  ShardedLoader(const sb::ModelConfig& c, int64_t dp_ranks, int64_t dp_rank)
      : c_(c), rows_(c.batch / dp_ranks), first_(dp_rank * (c.batch / dp_ranks)) {}

  sb::Batch batch(int64_t step) const {
    ts::Generator gen(1000 + static_cast<uint64_t>(step));
    const ts::Tensor tokens = ts::randint(0, c_.vocab, {c_.batch, c_.seq}, ts::kInt64, &gen);
    std::vector<int64_t> next = tokens.to_vector<int64_t>();
    for (int64_t& t : next) t = (7 * t + 3) % c_.vocab;
    const ts::Tensor targets = ts::from_vector(next, tokens.shape());
    return {tokens.narrow(0, first_, rows_), targets.narrow(0, first_, rows_)};
  }

 private:
  sb::ModelConfig c_;
  int64_t rows_, first_;
};

bool has_checkpoint(const std::string& dir) {
  return std::filesystem::exists(dir + "/tessera_checkpoint.json");
}

void train(const Flags& flags, ts::dist::ProcessGroupPtr world) {
  const sb::ModelConfig c{
      .layers = 2, .hidden = 64, .heads = 4, .seq = 16, .batch = 8, .vocab = 128};
  const sb::Strategy strategy = sb::strategy_named("fsdp_tp", world->size());
  const ts::DeviceMesh mesh(ts::DeviceType::CPU, strategy.mesh_shape, strategy.dim_names);
  ts::manual_seed(1);
  const std::shared_ptr<ts::nn::Module> model = sb::make_model(c);
  const ShardedLoader loader(c, mesh.size(0), mesh.get_local_rank(0));
  const bool loss_parallel =
      sb::apply_strategy(strategy, c, *model, mesh, loader.batch(0)).loss_parallel;
  ts::optim::AdamW optimizer(model->parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  ts::optim::LambdaLR schedule(optimizer,
                               ts::optim::warmup_cosine(flags.steps / 10, flags.steps, 0.1));

  int64_t first = 0;
  if (has_checkpoint(flags.dir)) {
    ckpt::StateDict sd = ckpt::get_state_dict(*model, &optimizer);
    ckpt::load(sd, flags.dir);
    ckpt::set_state_dict(*model, &optimizer, sd);  // weights, moments, step counts, lr, generator
    first = std::get<int64_t>(sd.scalars.at("step"));
    schedule.set_last_epoch(first);
    if (world->rank() == 0)
      std::printf("resumed from step %lld of %s\n", static_cast<long long>(first),
                  flags.dir.c_str());
  }
  const int64_t last = flags.stop_at > 0 ? std::min(flags.stop_at, flags.steps) : flags.steps;
  std::future<void> saving;
  for (int64_t step = first; step < last; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const sb::Batch batch = loader.batch(step);
    std::optional<ts::LossParallelGuard> guard;
    if (loss_parallel) guard.emplace();
    const ts::Tensor loss = sb::loss_of(c, (*model)(batch.input), batch.target);
    loss.backward();
    guard.reset();
    const double grad_norm = ts::nn::clip_grad_norm_(model->parameters(), 1.0).item<double>();
    const double lr = schedule.get_last_lr()[0];
    optimizer.step();
    optimizer.zero_grad();
    schedule.step();
    const double whole = sb::whole_loss(strategy, loss, mesh);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (world->rank() == 0) {
      std::printf("step %3lld  loss %.4f  lr %.2e  grad norm %.3f  tokens/s %.0f\n",
                  static_cast<long long>(step + 1), whole, lr, grad_norm,
                  static_cast<double>(c.batch * c.seq) / seconds);
    }
    if ((step + 1) % flags.every == 0) {
      ckpt::StateDict now = ckpt::get_state_dict(*model, &optimizer);
      now.scalars["step"] = step + 1;
      saving = ckpt::async_save(now, flags.dir);  // copied now, written while training goes on
    }
  }
  if (saving.valid()) saving.get();
  if (world->rank() == 0) {
    std::printf("trained steps %lld..%lld on %s\n", static_cast<long long>(first + 1),
                static_cast<long long>(last),
                ts::dist::started_by_launcher() ? "4 processes" : "4 rank threads");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = parse(argc, argv);
  const bool temporary = flags.dir.empty();
  const bool launched = ts::dist::started_by_launcher();
  if (temporary && launched) {
    std::fprintf(stderr,
                 "train_engine: under a launcher, give --dir (a folder every process sees)\n");
    return 2;
  }
  if (temporary) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-engine-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return 1;
    flags.dir = pattern;
  }
  try {
    if (launched) {
      train(flags, ts::dist::init_process_group());
    } else {
      ts::dist::run_threads(4, [&](ts::dist::ProcessGroupPtr world) { train(flags, world); });
    }
  } catch (const ts::Error& e) {
    std::fprintf(stderr, "train_engine: %s\n", e.what());
    return 1;
  }
  if (temporary) std::filesystem::remove_all(flags.dir);
  return 0;
}
